"""The perturbation_prediction task's own library: its files, encodings, metrics and published data.

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``; it imports the shared science package (``pertsci``),
never the harness or another task.

- :mod:`.de_files`: reading ``de_train``/``de_test`` layers and ``id_map``, writing a prediction,
  reading a prediction aligned to the truth.
- :mod:`.target_encoding`: the target encodings of the competition's top solutions.
- :mod:`.svd_compression`: targets compressed on their leading SVD components.
- :mod:`.mlp_regression`: the neural methods' encoded problem and MLP trainer.
- :mod:`.rowwise_metrics`: the row-wise metrics and the score file.
- :mod:`.public_data`: loading the published OP3 data (its files come from the data store).
"""
