"""PertReasonQA's own library: items and splits, reference reasoning paths, dataset files.

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``; it imports the shared science package (``pertsci``),
never the harness or another task.
"""
