"""PerturbQA's own library: labels and splits, knowledge-graph text, retrieval, graph models.

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``; it imports the shared science package (``pertsci``),
never the harness or another task.
"""
