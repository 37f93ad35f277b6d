"""PerturbQA's own library, one module per concern.

Task and data: ``task_items`` (subtasks, responses, items), ``published_labels`` (the published
files), ``published_subset`` (their test-resource subset), ``label_pipeline`` (labels from a
screen, appendix A.2), ``synthetic_screen``, ``dataset_assembly``, ``dataset_files``,
``training_prevalence``, ``knowledge_graph``, ``screen_manifest`` (what a screen declares).
Language-model methods: ``knowledge_text``, ``summary_prompts``, ``gene_summaries``,
``graph_retriever``, ``question_prompts``, ``answer_parsing``. Learned baselines: ``graph_models``.

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``; it imports the shared science package (``pertsci``),
never the harness or another task.
"""
