"""A disk cache of language-model generations: one JSON file per request, written atomically."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Environment variable naming the cache folder.
ENV_CACHE = "OPENPERT_LLM_CACHE"
#: Bumped when the layout of a cache entry changes, so that old entries are not read.
#: 2: the key and the entry hold the model's identity beside its name.
CACHE_VERSION = 2


def cache_key(model: str, messages: list[dict[str, str]], sampling: dict,
              model_identity: Mapping[str, Any] | None = None) -> str:
    """SHA-256 naming one generation request in the cache.

    The backend and URL are left out on purpose: the same request to the same model is the same
    generation whichever server answers it. The model is its name and its identity
    (:meth:`pertsci.llm.LLMClient.model_identity`: a file's SHA-256, what the server reports of
    the weights it serves), so another model served under the same name is another key.
    ``sampling`` is :meth:`SamplingParams.to_key_dict`.
    """
    payload = {
        "version": CACHE_VERSION,
        "model": model,
        "model_identity": dict(model_identity or {}),
        "messages": messages,
        "sampling": sampling,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so that a reader never sees half an entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def default_cache_dir() -> Path:
    """``$OPENPERT_LLM_CACHE`` if set, else ``~/.cache/openpert/llm``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "openpert" / "llm"


class GenerationCache:
    """One JSON file per key under ``root/<key[:2]>/<key>.json``.

    The two-character shard keeps directories small when a benchmark issues
    hundreds of thousands of prompts.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        """Where the entry of ``key`` lives."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, n: int) -> list[str] | None:
        """The ``n`` cached generations of a request, or ``None`` (absent, unreadable or malformed)."""
        path = self.path(key)
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:
            # Writes are atomic, so this is damage from outside; asking again
            # (and overwriting the file) is the useful response.
            log.warning("ignoring unreadable LLM cache entry %s: %s", path, exc)
            return None
        texts = entry.get("texts") if isinstance(entry, dict) else None
        if not isinstance(texts, list) or len(texts) != n or not all(isinstance(t, str) for t in texts):
            log.warning("ignoring malformed LLM cache entry %s", path)
            return None
        return texts

    def put(self, key: str, model: str, messages: list[dict[str, str]], sampling: dict, texts: list[str],
            model_identity: Mapping[str, Any] | None = None) -> None:
        """Store the generations of one request, with the request itself."""
        # The request is stored next to the answer so an entry can be inspected
        # (or audited) without re-deriving the key.
        entry = {
            "version": CACHE_VERSION,
            "key": key,
            "model": model,
            "model_identity": dict(model_identity or {}),
            "messages": messages,
            "sampling": sampling,
            "texts": texts,
            "created": time.time(),
        }
        _write_atomic(self.path(key), json.dumps(entry, ensure_ascii=False, indent=1))
