"""The linear-baseline task's own library: simulation, pseudobulk, splits, prior knowledge, the linear model.

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``; it imports the shared science package (``pertsci``),
never the harness or another task. Every path it reads is passed in by the caller.
"""
