"""The hyperparameters of appendix B.2.6 and the defaults every step of the pipeline uses."""

from __future__ import annotations

import dataclasses

import pytest
from pertreasonqa_lib.path_params import DEFAULT_PARAMS, MAX_HOPS_CHEMICAL, PathParams


def test_defaults_are_the_papers_values():
    assert dataclasses.asdict(DEFAULT_PARAMS) == {
        "beta": 10.0, "delta_src": 0.05, "delta_tgt": 0.5, "eps_w": 1e-9, "w_base": 1.0, "alpha": 0.85,
        "ppr_max_iter": 50, "ppr_tol": 1e-4, "eps_c": 1e-4, "max_hops": 4, "n_paths": 4, "penalty": 2.0,
        "ambiguity_budget": 1}
    assert DEFAULT_PARAMS == PathParams()
    assert MAX_HOPS_CHEMICAL == 3  # B.2.6: D_max "reduced to 3 internally" after the drug-target edge


def test_params_are_frozen_so_the_shared_default_cannot_drift():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_PARAMS.max_hops = 5
    assert PathParams(max_hops=3).max_hops == 3 and DEFAULT_PARAMS.max_hops == 4
