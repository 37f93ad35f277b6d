"""BIOME-Bench's own library: items, the split by pathway, answer extraction, scores, prompts and judging.

Modules, one job each:

- :mod:`~biome_bench_lib.vocabulary`: the 18 relations, the two kinds of item, the judge's dimensions;
- :mod:`~biome_bench_lib.entity_lists`: splitting Task B entity lists, names from states;
- :mod:`~biome_bench_lib.items`: items from the original repository's JSONL files;
- :mod:`~biome_bench_lib.pathway_split`: train, test and solution of one species, split by pathway;
- :mod:`~biome_bench_lib.dataset_description`: the dataset's name, organism and counted description;
- :mod:`~biome_bench_lib.item_files`: reading and writing items, predictions and scores (h5ad);
- :mod:`~biome_bench_lib.similar_items`: the text an embedding sees, cosine nearest neighbours;
- :mod:`~biome_bench_lib.answer_extraction`: relation labels, judge and coverage JSON from answers;
- :mod:`~biome_bench_lib.relation_scores`: Task A accuracy, macro-F1 and their bootstrap intervals;
- :mod:`~biome_bench_lib.metric_averages`: means of per-item values, the paper's average on 0-100;
- :mod:`~biome_bench_lib.prompts`: every chat the task sends to a model;
- :mod:`~biome_bench_lib.judge_validity`: corrupted references and the drop of the judge's scores (section 4.4);
- :mod:`~biome_bench_lib.llm_calls`: calling a model over many items (answers, judge, coverage).

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``. It may use the shared science package (``pertsci``),
never the harness or another task.
"""
