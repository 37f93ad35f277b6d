"""PertReasonQA's own library: items, splits, reference reasoning paths, answers, scores and files.

Reference paths (appendix B.2), one module per step:

- :mod:`~pertreasonqa_lib.path_params` — the hyperparameters of B.2.6;
- :mod:`~pertreasonqa_lib.signed_graph` — the signed, directed graph (drug-target edges included);
- :mod:`~pertreasonqa_lib.cell_state` — KS thresholds, basal states and edge gating;
- :mod:`~pertreasonqa_lib.pagerank` — personalised PageRank;
- :mod:`~pertreasonqa_lib.path_search` — hop-limited cheapest paths and their diversification;
- :mod:`~pertreasonqa_lib.sign_filters` — Algorithms 1 and 2;
- :mod:`~pertreasonqa_lib.reference_paths` — the whole pipeline for many items.

Items and splits (section 2.2, appendix B.1): :mod:`~pertreasonqa_lib.genetic_items`,
:mod:`~pertreasonqa_lib.chemical_items`, :mod:`~pertreasonqa_lib.basal_expression`,
:mod:`~pertreasonqa_lib.functional_splits`. Datasets: :mod:`~pertreasonqa_lib.dataset_selection`
(folds, subsampling, the graph's scope) and :mod:`~pertreasonqa_lib.dataset_files`. Answers and
scores: :mod:`~pertreasonqa_lib.path_serialisation`, :mod:`~pertreasonqa_lib.answer_parsing`,
:mod:`~pertreasonqa_lib.prompts`, :mod:`~pertreasonqa_lib.prediction_files`,
:mod:`~pertreasonqa_lib.balanced_accuracy`, :mod:`~pertreasonqa_lib.faithfulness`.

Components declare this folder in ``resources`` and import it after
``sys.path.append(meta["resources_dir"])``; it imports the shared science package (``pertsci``),
never the harness or another task. Every file it reads is a path passed in by the caller.
"""
