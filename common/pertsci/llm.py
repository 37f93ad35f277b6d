"""Text generation for tasks and methods that call a language model.

One client, :class:`LLMClient`, with two backends:

``openai``
    Any OpenAI-compatible HTTP server, which is how ``vllm serve`` is usually
    run. Requests go to ``POST {base_url}/chat/completions`` with the standard
    library only (:mod:`pertsci.llm_http`: kept-alive connections, one per
    request in flight), ``max_concurrency`` at a time (default 8) from a
    thread pool, with retries and exponential backoff on connection errors,
    timeouts, HTTP 429 and HTTP 5xx.
``vllm``
    An in-process ``vllm.LLM`` when the ``vllm`` package is importable. It is
    imported lazily, so the module works without it.
``dry_run``
    Nothing is sent: each :meth:`LLMClient.generate` call writes one line to
    standard error saying what it would send (prompts, samples, prompt
    tokens, prefix sharing; :mod:`pertsci.llm_plan`) and answers with a
    placeholder text. The generation cache is neither read nor written.
    ``openpert benchmark --dry-run`` runs components this way.

Requests are sent in the lexicographic order of their prompts and the answers
returned in the caller's order: prompts that share a prefix (the same
perturbation, the same retrieved context) then follow each other, which
vLLM's automatic prefix caching rewards.

What the ``openai`` backend does where servers differ:

* The model. A configured model name must be one the server lists
  (``GET /models``); otherwise :class:`LLMConfigError` names what it serves,
  before anything is generated (llama-cpp-python's server would answer any name
  with its one model, silently). A server without the listing (HTTP 404) is
  used as configured, with a warning.
* Fewer choices than ``n``. llama-cpp-python's server ignores ``n`` and answers
  one choice. The client then asks for each missing sample with a further
  request of ``n=1`` (seeds ``seed + 1``, ``seed + 2``, ... when a seed is set,
  none otherwise), so every caller gets its ``n`` samples; those requests count
  in :attr:`LLMClient.stats` as requests.
* A prompt longer than the model's context window. The server's HTTP 400
  (code ``context_length_exceeded``, or vLLM's "maximum context length is N
  tokens" wordings) is not an error of the run: the prompt is answered with
  ``n`` empty texts, which every task parses as an abstention, and recorded as a
  :class:`PromptTooLong` in :attr:`LLMClient.failures` (and counted as
  ``failed``). Such answers are never cached, so a rerun asks again. In-process
  vLLM, which would refuse the whole batch, gets only the prompts that fit its
  ``max_model_len`` in its chat template; the others are refused alike.
* A server that stops mid-run. Every answer is written to the cache as soon as
  it arrives; when retries are exhausted, the error says how many of the
  call's answers are in the cache, which a rerun does not ask again.

``backend="auto"`` picks ``vllm`` when a model is given, ``vllm`` is importable
and no base URL is set; otherwise ``openai``.

Generations are cached on disk, one small JSON file per request, keyed by the
SHA-256 of the model's name and identity (:meth:`LLMClient.model_identity`),
the messages and the sampling parameters (seed included) but not of the backend
or the URL: the same model answering the same prompt with the same parameters is
the same experiment whichever way it is served, and a resumed benchmark must
not pay for it twice. The identity is what tells the weights apart where the
name does not: the SHA-256 of the model file (given, or computed for a local
file run in process) and what the server lists of the model it serves
(``GET /models``: vLLM's ``root`` and ``parent``, llama.cpp's ``meta``), so
another model served under the same name is asked again, never answered from
the cache.

Configuration comes from arguments or, when an argument is ``None``, from the
environment variables ``OPENPERT_LLM_BASE_URL``, ``OPENPERT_LLM_MODEL``,
``OPENPERT_LLM_MODEL_SHA256``, ``OPENPERT_LLM_API_KEY``, ``OPENPERT_LLM_BACKEND``,
``OPENPERT_LLM_CACHE`` and ``OPENPERT_LLM_MAX_TOKENS``.

``OPENPERT_LLM_MAX_TOKENS`` (``max_tokens_cap``) caps the tokens generated per
completion: each request asks for ``min(sampling.max_tokens, cap)``, and that is
the value its cache key holds. It is for checking a benchmark's path end to end
on a small model with a short context window, not for results: answers cut short
are not the method's answers.

Examples
--------
>>> client = LLMClient(base_url="http://127.0.0.1:8000/v1", model="my-model")  # doctest: +SKIP
>>> client.generate(["Name a gene."], SamplingParams(n=2, seed=0))  # doctest: +SKIP
[['TP53', 'BRCA1']]
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import http.client
import json
import logging
import os
import random
import re
import sys
import threading
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pertsci.llm_cache import ENV_CACHE, GenerationCache, cache_key, default_cache_dir
from pertsci.llm_http import HTTPTransport, Response
from pertsci.llm_plan import TokenCounter, placeholder_answer, plan_line, plan_requests, prompt_key

__all__ = [
    "SamplingParams",
    "LLMClient",
    "LLMError",
    "LLMConfigError",
    "LLMRequestError",
    "PromptTooLong",
    "client_from_arguments",
    "normalize_prompt",
    "ENV_CACHE",
    "STATS_KEYS",
]

log = logging.getLogger(__name__)

ENV_BASE_URL = "OPENPERT_LLM_BASE_URL"
ENV_MODEL = "OPENPERT_LLM_MODEL"
ENV_MODEL_SHA256 = "OPENPERT_LLM_MODEL_SHA256"
ENV_API_KEY = "OPENPERT_LLM_API_KEY"
ENV_BACKEND = "OPENPERT_LLM_BACKEND"
ENV_MAX_TOKENS = "OPENPERT_LLM_MAX_TOKENS"

BACKENDS = ("auto", "openai", "vllm", "dry_run")
#: Fields of a server's ``GET /models`` entry that tell the weights apart, as they enter the model's
#: identity: vLLM's ``root`` (the path or hub id the weights were loaded from) and ``parent`` (the
#: base model of an adapter), llama.cpp's ``meta`` (parameter count, file size, vocabulary and
#: training context of the GGUF). Not ``created`` (the time of the request on vLLM), ``owned_by``
#: (the server's software) nor ``max_model_len`` (the window, not the weights).
SERVED_IDENTITY_FIELDS = ("root", "parent", "meta")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Model name of a dry run given none (it only enters the log lines).
DRY_RUN_MODEL = "dry-run"
#: The header each request carries with the generation requests this client has planned so far
#: (uncached prompts of its ``generate`` calls): a benchmark's harness shows answers out of it while
#: the job runs, and does not pass it on to the server.
PLANNED_HEADER = "X-Openpert-Planned"

#: The counters of :attr:`LLMClient.stats`:
#:
#: ``prompts``      prompts asked for (cached ones included);
#: ``samples``      completions returned for them (``n`` per prompt, cached ones included);
#: ``generated``    prompts actually generated (not found in the cache);
#: ``cache_hits``   prompts answered from the cache;
#: ``requests``     generation requests sent (HTTP requests, retries included; one per batch in process);
#: ``retries``      requests sent again after a connection error, a timeout, HTTP 429 or 5xx;
#: ``prompt_tokens``, ``completion_tokens``  tokens the backend reported (the server's ``usage``, or
#:                  vLLM's token ids); cached answers cost none;
#: ``unmetered``    answered requests whose response reported no ``usage``, so that missing token
#:                  counts are visible rather than read as zero;
#: ``failed``       prompts the server refused as longer than the model's context window, answered
#:                  with empty texts (:attr:`LLMClient.failures` names them);
#: ``context_window``  the model's context window in tokens as the server stated it in those refusals
#:                  (the largest stated; 0 when none was refused or none stated it). Not a count:
#:                  combined by its largest value (:data:`LARGEST_KEYS`), never summed.
STATS_KEYS = ("prompts", "samples", "generated", "cache_hits", "requests", "retries", "prompt_tokens",
              "completion_tokens", "unmetered", "failed", "context_window")
#: Keys of :data:`STATS_KEYS` combined over clients (or jobs) by their largest value.
LARGEST_KEYS = ("context_window",)


Message = Mapping[str, str]
#: A prompt is either a plain string (sent as one user message) or a list of
#: chat messages ``{"role": ..., "content": ...}``.
Prompt = str | Sequence[Message]


class _Default:
    """Marker for "argument not given": ``None`` already means "disabled"."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT: Any = _Default()


class LLMError(RuntimeError):
    """Base class of the errors raised by this module."""


class LLMConfigError(LLMError):
    """The client is not configured well enough to send anything."""


class LLMRequestError(LLMError):
    """A request failed for good (a 4xx other than 429, or retries exhausted).

    Attributes
    ----------
    url : str
        The URL requested.
    status : int or None
        The HTTP status, ``None`` for connection errors and timeouts.
    server_message : str
        What the server said (its ``error.message`` when it sent JSON).
    """

    def __init__(self, message: str, *, url: str, status: int | None, server_message: str = ""):
        super().__init__(message)
        self.url = url
        self.status = status
        self.server_message = server_message


@dataclasses.dataclass(frozen=True)
class PromptTooLong:
    """A prompt the server refused as longer than the model's context window; it was answered with empty texts.

    Attributes
    ----------
    item : str or None
        The item the prompt was for, as the caller labelled it (``labels=`` of
        :meth:`LLMClient.generate`); ``None`` when it gave no labels.
    prompt_tokens : int or None
        The prompt's length in tokens, as the server counted it (``None``: its message did not say).
    context_window : int or None
        The model's context window in tokens, as the server stated it.
    completion_tokens : int or None
        The completion tokens the request asked for, when the server's message names them.
    server_message : str
        What the server said.
    """

    item: str | None
    prompt_tokens: int | None
    context_window: int | None
    completion_tokens: int | None = None
    server_message: str = ""

    def describe(self) -> str:
        """One line for a log and for an output's ``uns["llm_failures"]``."""
        item = f"item {self.item}" if self.item is not None else "a prompt without an item label"
        tokens, window = self.prompt_tokens, self.context_window
        if tokens is None or window is None:
            said = f"prompt is longer than the model's context window (the server said: {self.server_message})"
        elif tokens >= window:
            said = f"prompt of {tokens} tokens is longer than the model's context window of {window} tokens"
        else:
            # vLLM refuses a prompt that leaves less room than max_tokens in the window.
            asked = "the completion" if self.completion_tokens is None else f"the {self.completion_tokens} completion tokens asked"
            said = (f"prompt of {tokens} tokens leaves no room for {asked} in the model's context window of "
                    f"{window} tokens")
        return f"{item}: {said}; answered as an abstention"


class _ContextRefused(LLMRequestError):
    """The server refused a request as longer than the model's context window (HTTP 400).

    Attributes
    ----------
    refusal : PromptTooLong
        What the server's message says (no item yet).
    """

    def __init__(self, message: str, *, url: str, status: int | None, server_message: str, refusal: PromptTooLong):
        super().__init__(message, url=url, status=status, server_message=server_message)
        self.refusal = refusal


@dataclasses.dataclass
class SamplingParams:
    """How to sample: the parameters shared by the OpenAI API and vLLM.

    Parameters
    ----------
    temperature : float
        Softmax temperature; 0 is greedy decoding.
    top_p : float
        Nucleus sampling mass.
    max_tokens : int
        Largest number of generated tokens per completion.
    n : int
        Completions per prompt.
    seed : int or None
        Sampling seed. It is part of the cache key, so a new seed asks again.
    stop : str or list of str or None
        Stop sequences.
    """

    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 1024
    n: int = 1
    seed: int | None = None
    stop: str | list[str] | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingParams.n must be >= 1, got {self.n}")
        if self.max_tokens < 1:
            raise ValueError(f"SamplingParams.max_tokens must be >= 1, got {self.max_tokens}")

    def stop_list(self) -> list[str] | None:
        """Stop sequences as a list (a single string becomes a one-item list)."""
        if self.stop is None:
            return None
        if isinstance(self.stop, str):
            return [self.stop]
        return [str(s) for s in self.stop]

    def to_key_dict(self) -> dict[str, Any]:
        """The parameters in a canonical form, as they enter the cache key."""
        return {
            "temperature": float(self.temperature),
            "top_p": float(self.top_p),
            "max_tokens": int(self.max_tokens),
            "n": int(self.n),
            "seed": None if self.seed is None else int(self.seed),
            "stop": self.stop_list(),
        }


def normalize_prompt(prompt: Prompt) -> list[dict[str, str]]:
    """Turn a prompt into a list of chat messages.

    Parameters
    ----------
    prompt : str or sequence of mapping
        A string is wrapped as one ``user`` message (how a plain completion
        prompt is sent to a chat endpoint); a sequence of ``{"role", "content"}``
        mappings is copied.

    Returns
    -------
    list of dict
        Messages with ``role`` and ``content`` strings.

    Raises
    ------
    TypeError
        When a message is not a mapping with string ``role`` and ``content``.
    """
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = []
    for i, message in enumerate(prompt):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str) or not isinstance(
            message.get("content"), str
        ):
            raise TypeError(f"message {i} must be a mapping with string 'role' and 'content', got {message!r}")
        messages.append({"role": message["role"], "content": message["content"]})
    if not messages:
        raise ValueError("a prompt needs at least one message")
    return messages


def _import_vllm():
    """The ``vllm`` module, or ``None`` when it is not installed.

    Imported here rather than at the top because it pulls in CUDA and takes
    seconds; most runs use an HTTP server instead.
    """
    try:
        import vllm  # noqa: PLC0415
    except ImportError:
        return None
    return vllm


def _first_set(*values):
    """First value that is neither ``None`` nor an empty string."""
    for value in values:
        if value is not None and value != "":
            return value
    return None


class LLMClient:
    """Generate text with an OpenAI-compatible server or an in-process vLLM.

    Parameters
    ----------
    base_url : str, optional
        OpenAI-compatible API root, e.g. ``http://127.0.0.1:8000/v1``.
        Default ``$OPENPERT_LLM_BASE_URL``.
    model : str, optional
        Model name (served name for ``openai``, path or hub id for ``vllm``).
        Default ``$OPENPERT_LLM_MODEL``. With the ``openai`` backend and no
        model, the first model listed by ``GET {base_url}/models`` is used; a
        model given must be one listed there.
    model_sha256 : str, optional
        SHA-256 (64 hexadecimal digits) of the model's file, e.g. the GGUF a
        llama.cpp server serves, which its ``GET /models`` does not identify.
        Part of the model's identity in the cache key. Default
        ``$OPENPERT_LLM_MODEL_SHA256``.
    api_key : str, optional
        Sent as ``Authorization: Bearer``. Default ``$OPENPERT_LLM_API_KEY``.
    backend : {"auto", "openai", "vllm", "dry_run"}, optional
        Default ``$OPENPERT_LLM_BACKEND`` or ``"auto"``.
    cache_dir : path or None, optional
        Generation cache. Default ``$OPENPERT_LLM_CACHE`` or
        ``~/.cache/openpert/llm``; ``None`` disables the cache.
    max_concurrency : int
        Simultaneous HTTP requests (``openai`` backend), each on a kept-alive
        connection of its own. The default, 8, keeps a server that batches
        (vLLM, llama.cpp with several slots) busy without queueing much at one
        that answers one request at a time.
    max_retries : int
        Retries after the first attempt on connection errors, timeouts, HTTP
        429 and 5xx.
    retry_base_delay : float
        First backoff delay in seconds; doubled each retry.
    retry_max_delay : float
        Cap of one backoff delay in seconds.
    retry_seed : int
        Seed of the jitter RNG, so retry timing is reproducible.
    timeout : float
        Seconds to wait for one HTTP response (long generations are slow).
    batch_size : int
        Prompts handed to the backend at once. A server's answers are cached
        one by one as they arrive; in-process vLLM's after each batch, which
        bounds the work lost when a run is interrupted.
    max_tokens_cap : int, optional
        Largest ``max_tokens`` sent (and keyed in the cache), whatever the
        sampling asks. Default ``$OPENPERT_LLM_MAX_TOKENS``, else no cap. For
        checking a benchmark's path on a small model, not for results.
    vllm_kwargs : dict, optional
        Extra arguments for ``vllm.LLM`` (``tensor_parallel_size``, ...).

    Attributes
    ----------
    stats : dict
        Counters of what the client did (:data:`STATS_KEYS`).
    failures : list of PromptTooLong
        The prompts refused as longer than the model's context window, call
        by call, in the order of each call's prompts.

    Raises
    ------
    LLMConfigError
        When neither a base URL nor a model usable with vLLM is configured, or
        the cap is not a positive whole number.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        model_sha256: str | None = None,
        api_key: str | None = None,
        backend: str | None = None,
        cache_dir: str | os.PathLike | None = _DEFAULT,
        max_concurrency: int = 8,
        max_retries: int = 5,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 60.0,
        retry_seed: int = 0,
        timeout: float = 600.0,
        batch_size: int = 256,
        max_tokens_cap: int | None = None,
        vllm_kwargs: Mapping[str, Any] | None = None,
    ):
        self.base_url = _first_set(base_url, os.environ.get(ENV_BASE_URL))
        if self.base_url is not None:
            self.base_url = str(self.base_url).rstrip("/")
        self.model = _first_set(model, os.environ.get(ENV_MODEL))
        self.model_sha256 = _checked_sha256(_first_set(model_sha256, os.environ.get(ENV_MODEL_SHA256)))
        self.api_key = _first_set(api_key, os.environ.get(ENV_API_KEY))
        requested = str(_first_set(backend, os.environ.get(ENV_BACKEND), "auto")).lower()
        if requested not in BACKENDS:
            raise LLMConfigError(f"unknown LLM backend {requested!r}; expected one of {', '.join(BACKENDS)}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.backend = self._resolve_backend(requested)

        if cache_dir is _DEFAULT:
            cache_dir = default_cache_dir()
        self.cache_dir = None if cache_dir is None else Path(cache_dir).expanduser()
        self._cache = None if self.cache_dir is None else GenerationCache(self.cache_dir)

        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.retry_base_delay = float(retry_base_delay)
        self.retry_max_delay = float(retry_max_delay)
        self.timeout = float(timeout)
        self.batch_size = int(batch_size)
        self.max_tokens_cap = _checked_cap(_first_set(max_tokens_cap, os.environ.get(ENV_MAX_TOKENS)))
        self.vllm_kwargs = dict(vllm_kwargs or {})
        self._http = None if self.base_url is None else HTTPTransport(self.base_url)

        # Jitter spreads retries of concurrent requests apart; seeding it keeps
        # a rerun's timing (and so its logs) the same. Threads share it.
        self._rng = random.Random(retry_seed)
        self._lock = threading.Lock()
        self._vllm_llm = None
        # GET /models, asked once: the model's name when none is configured, whether the server
        # serves the one configured, and its identity.
        self._served: list[dict[str, Any]] | None = None
        self._model_checked = False
        self._model_lock = threading.Lock()
        self._identity: dict[str, Any] | None = None
        self._identity_lock = threading.Lock()
        # Said once per client: the server answers fewer choices than n.
        self._topping_up_said = False
        # A dry run's prompts already "sent" (cache keys), and how it counts their tokens.
        self._dry_run_sent: set[str] = set()
        self._token_counter: TokenCounter | None = None
        #: Counters of what this client did (see :data:`STATS_KEYS`).
        self.stats = dict.fromkeys(STATS_KEYS, 0)
        self._planned_requests = 0  # sent as PLANNED_HEADER
        #: Prompts refused as longer than the model's context window (see :class:`PromptTooLong`).
        self.failures: list[PromptTooLong] = []

    # -- configuration -----------------------------------------------------

    def _resolve_backend(self, requested: str) -> str:
        if requested == "dry_run":
            self.model = self.model or DRY_RUN_MODEL
            return "dry_run"
        if requested == "openai":
            if self.base_url is None:
                raise LLMConfigError(
                    f"the openai LLM backend needs a base URL: pass base_url or set {ENV_BASE_URL} "
                    "(e.g. http://127.0.0.1:8000/v1)"
                )
            return "openai"
        if requested == "vllm":
            if self.model is None:
                raise LLMConfigError(f"the vllm LLM backend needs a model: pass model or set {ENV_MODEL}")
            if _import_vllm() is None:
                raise LLMConfigError("the vllm LLM backend was requested but the 'vllm' package is not importable")
            return "vllm"
        # auto: a server that is explicitly configured wins over loading a model here.
        if self.base_url is None and self.model is not None and _import_vllm() is not None:
            return "vllm"
        if self.base_url is None:
            raise LLMConfigError(
                f"no LLM configured: set a base URL ({ENV_BASE_URL} or base_url=, for an OpenAI-compatible "
                f"server such as `vllm serve`) or a model ({ENV_MODEL} or model=) with the vllm package installed"
            )
        return "openai"

    def __repr__(self) -> str:
        where = self.base_url if self.backend == "openai" else "in-process"
        return f"LLMClient(backend={self.backend!r}, model={self.model!r}, at={where!r}, cache_dir={self.cache_dir})"

    def resolved_model(self) -> str:
        """The model name used in requests and cache keys.

        With the ``openai`` backend, asks the server (``GET /models``) once: without a configured
        model, the first id it lists is used; a configured model must be one it lists.

        Raises
        ------
        LLMConfigError
            When the server lists models and not the configured one (the message names those it
            serves), or lists none and no model is configured.
        LLMRequestError
            When the server cannot be reached.
        """
        with self._model_lock:
            if self.model is None:
                self.model = self._discover_model()
            elif self.backend == "openai" and not self._model_checked:
                self._check_served(self.model)
            self._model_checked = True
            return self.model

    def _served_models(self) -> list[dict[str, Any]]:
        """The entries of ``GET {base_url}/models`` that have an ``id``, asked once per client."""
        if self._served is None:
            body = self._send_with_retries(f"{self.base_url}/models", None)
            data = body.get("data") if isinstance(body, dict) else None
            self._served = [m for m in data if isinstance(m, dict) and m.get("id")] if isinstance(data, list) else []
        return self._served

    def _discover_model(self) -> str:
        ids = [str(m["id"]) for m in self._served_models()]
        if not ids:
            raise LLMConfigError(f"{self.base_url}/models lists no models; pass model or set {ENV_MODEL}")
        log.info("using model %s served at %s", ids[0], self.base_url)
        return ids[0]

    def _check_served(self, model: str) -> None:
        """Raise :class:`LLMConfigError` unless the server lists ``model`` (a server without the list passes)."""
        url = f"{self.base_url}/models"
        try:
            entries = self._served_models()
        except LLMRequestError as exc:
            if exc.status is None or exc.status >= 500 or exc.status == 429:
                raise
            # A server without the list (HTTP 404): the name cannot be checked, and is all there is to key on.
            log.warning("%s answered HTTP %s: the model %s cannot be checked, and its answers are cached under "
                        "its name alone", url, exc.status, model)
            self._served = []
            return
        ids = [str(m["id"]) for m in entries]
        if model not in ids:
            # A server may answer any name with the model it has (llama-cpp-python's does): never ask it.
            raise LLMConfigError(f"the server at {self.base_url} does not serve the model {model!r}; it serves "
                                 f"{', '.join(repr(i) for i in ids) or 'nothing'} (GET {url}). Set the model "
                                 f"(--llm_model or ${ENV_MODEL}) to one of them.")

    def model_identity(self) -> dict[str, Any]:
        """What tells the model's weights apart beyond its name, as it enters the cache key.

        Found once per client:

        * ``sha256``: the configured ``model_sha256``; in process, the SHA-256 of a model that
          is a local file (a GGUF), or of the files of a local folder;
        * with a server, the :data:`SERVED_IDENTITY_FIELDS` of its ``GET /models`` entry for the
          model (vLLM's ``root`` and ``parent``, llama.cpp's ``meta``); a server without
          ``/models`` adds nothing (:meth:`resolved_model` warns);
        * in process, ``root`` (the model as given) and vLLM's ``revision`` when set.

        Returns
        -------
        dict
            JSON-serialisable; empty when nothing beyond the name is known.

        Raises
        ------
        LLMConfigError
            When the configured SHA-256 is not the one of the local model file.
        LLMRequestError
            When the server cannot be reached (its answers could not be had either).
        """
        with self._identity_lock:
            if self._identity is None:
                self._identity = self._find_identity(self.resolved_model())
            return dict(self._identity)

    def _find_identity(self, model: str) -> dict[str, Any]:
        identity: dict[str, Any] = {}
        if self.model_sha256 is not None:
            identity["sha256"] = self.model_sha256
        if self.backend == "openai":
            identity.update(self._served_identity(model))
        elif self.backend == "vllm":
            local = _local_model_sha256(model)
            if local is not None and self.model_sha256 is not None and local != self.model_sha256:
                raise LLMConfigError(f"the model {model} has SHA-256 {local}, not the configured {self.model_sha256} "
                                     f"(model_sha256 or ${ENV_MODEL_SHA256})")
            identity.update({"root": model, **({"sha256": local} if local else {})})
            if self.vllm_kwargs.get("revision") is not None:
                identity["revision"] = str(self.vllm_kwargs["revision"])
        return identity

    def _served_identity(self, model: str) -> dict[str, Any]:
        # resolved_model() has checked the model against the list; no entry: a server without the list.
        entry = next((m for m in self._served or [] if m["id"] == model), None)
        if entry is None:
            return {}
        return {field: entry[field] for field in SERVED_IDENTITY_FIELDS if entry.get(field) is not None}

    # -- public API --------------------------------------------------------

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingParams | None = None, *,
                 labels: Sequence[object] | None = None) -> list[list[str]]:
        """Generate ``sampling.n`` completions for each prompt.

        Parameters
        ----------
        prompts : sequence of prompt
            Each a string (sent as one user message) or a list of chat messages.
        sampling : SamplingParams, optional
            Default ``SamplingParams()``. Its ``max_tokens`` is capped at :attr:`max_tokens_cap`.
        labels : sequence, optional
            The item each prompt is for (e.g. the item ids of a task's test file), one per
            prompt: a prompt the server refuses as too long is recorded under it
            (:attr:`failures`).

        Returns
        -------
        list of list of str
            One list of ``n`` texts per prompt, in input order; ``n`` empty texts for a prompt
            longer than the model's context window.

        Raises
        ------
        LLMRequestError
            When a request fails for good; the message says how many of the call's answers are
            in the cache, which a rerun does not ask again.

        Notes
        -----
        Cached prompts are not sent. With the cache on, identical prompts in
        one call are sent once and share the answer, exactly as they would on
        a later call; with ``cache_dir=None`` every prompt is sent. Each answer
        is cached as soon as it arrives.
        """
        if isinstance(prompts, str) or (
            isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], Mapping)
        ):
            raise TypeError(
                "generate() takes a list of prompts; wrap a single prompt (string or message list) in a list "
                "or use generate_one()"
            )
        sampling = self.capped(sampling or SamplingParams())
        conversations = [normalize_prompt(p) for p in prompts]
        items = [None] * len(conversations) if labels is None else [str(label) for label in labels]
        if len(items) != len(conversations):
            raise ValueError(f"generate() got {len(items)} labels for {len(conversations)} prompts")
        if not conversations:
            return []
        model = self.resolved_model()
        if self.backend == "dry_run":
            return self._dry_run(conversations, sampling, model)
        with self._lock:
            self.stats["prompts"] += len(conversations)
            self.stats["samples"] += len(conversations) * sampling.n
        results: list[list[str] | None] = [None] * len(conversations)
        identity = self.model_identity() if self._cache is not None else None
        key_dict = sampling.to_key_dict()

        # Work out what must be generated; indices sharing a key share a request.
        todo: dict[str, list[int]] = {}
        cached: set[str] = set()  # keys of the call's answers in the cache: hits, then answers as they arrive
        refused: dict[int, PromptTooLong] = {}  # index -> the refusal of its prompt as too long
        if self._cache is not None:
            for i, messages in enumerate(conversations):
                key = cache_key(model, messages, key_dict, identity)
                if key in todo:
                    todo[key].append(i)
                    continue
                hit = self._cache.get(key, sampling.n)
                if hit is not None:
                    results[i] = list(hit)
                    cached.add(key)
                    with self._lock:
                        self.stats["cache_hits"] += 1
                else:
                    todo[key] = [i]
        else:
            todo = {str(i): [i] for i in range(len(conversations))}

        def keep(entry: tuple[str, list[int]], outcome: list[str] | PromptTooLong) -> None:
            """File one prompt's outcome as it arrives (on a worker thread): cache its answer at once."""
            key, indices = entry
            if isinstance(outcome, PromptTooLong):
                # Not cached: the same prompt to a model with a longer window gets an answer.
                with self._lock:
                    refused.update((j, dataclasses.replace(outcome, item=items[j])) for j in indices)
                    self.stats["failed"] += len(indices)
                    self.stats["context_window"] = max(self.stats["context_window"], outcome.context_window or 0)
                for j in indices:
                    results[j] = [""] * sampling.n
                return
            if self._cache is not None:
                self._cache.put(key, model, conversations[indices[0]], key_dict, outcome, identity)
                with self._lock:
                    cached.add(key)
            for j in indices:
                results[j] = list(outcome)
            with self._lock:
                self.stats["generated"] += 1

        # Prompts sharing a prefix are sent together (and answers put back by index).
        pending = sorted(todo.items(), key=lambda item: prompt_key(conversations[item[1][0]]))
        with self._lock:
            self._planned_requests += len(pending)
        distinct = len(cached) + len(todo)
        try:
            for start in range(0, len(pending), self.batch_size):
                batch = pending[start : start + self.batch_size]
                self._generate_uncached([conversations[idx[0]] for _, idx in batch], sampling, model,
                                        lambda position, outcome, batch=batch: keep(batch[position], outcome))
        except LLMRequestError as exc:
            raise self._interrupted(exc, in_cache=len(cached), distinct=distinct) from exc
        with self._lock:
            # In the caller's order, whatever order the refusals arrived in: outputs listing them stay the same.
            self.failures.extend(refused[j] for j in sorted(refused))
        return results  # type: ignore[return-value]

    def capped(self, sampling: SamplingParams) -> SamplingParams:
        """``sampling`` with ``max_tokens`` at most :attr:`max_tokens_cap`: what is sent and keyed in the cache."""
        if self.max_tokens_cap is None or sampling.max_tokens <= self.max_tokens_cap:
            return sampling
        return dataclasses.replace(sampling, max_tokens=self.max_tokens_cap)

    def _interrupted(self, exc: LLMRequestError, *, in_cache: int, distinct: int) -> LLMRequestError:
        """``exc`` saying what of the call is kept: the answers in the cache, which a rerun does not ask again."""
        if self._cache is None:
            kept = (f"the generation cache is off, so a rerun asks all {distinct} prompts of this call again "
                    "(set a cache folder to keep answers across runs)")
        else:
            kept = (f"{in_cache} of the {distinct} answers of this call are in the generation cache ({self.cache_dir}); "
                    f"a rerun (openpert benchmark --resume) asks only the other {distinct - in_cache}")
        return LLMRequestError(f"{exc}; {kept}", url=exc.url, status=exc.status, server_message=exc.server_message)

    def generate_one(self, prompt: Prompt, sampling: SamplingParams | None = None) -> list[str]:
        """:meth:`generate` for one prompt: its list of ``n`` texts."""
        return self.generate([prompt], sampling)[0]

    def _dry_run(self, conversations: list[list[dict[str, str]]], sampling: SamplingParams,
                 model: str) -> list[list[str]]:
        """Log what :meth:`generate` would send and answer every prompt with a placeholder.

        A prompt repeated within or across calls is counted once, as the cache of a real run
        would send it once.
        """
        if self._token_counter is None:
            self._token_counter = TokenCounter()
        sent, answers, repeated = [], [], 0
        for messages in conversations:
            key = cache_key(model, messages, sampling.to_key_dict())
            answers.append([placeholder_answer(prompt=key)] * sampling.n)
            if key in self._dry_run_sent:
                repeated += 1
                continue
            self._dry_run_sent.add(key)
            sent.append(messages)
        record = plan_requests(sent, sampling.n, self._token_counter, max_tokens=sampling.max_tokens,
                               repeated=repeated)
        print(plan_line(record), file=sys.stderr, flush=True)
        return answers

    # -- backends ----------------------------------------------------------

    def _generate_uncached(self, conversations: list[list[dict[str, str]]], sampling: SamplingParams, model: str,
                           on_answer: Callable[[int, list[str] | PromptTooLong], None]) -> None:
        """Generate every conversation, calling ``on_answer(position, texts or refusal)`` as each is answered."""
        if self.backend == "vllm":
            self._generate_vllm(conversations, sampling, on_answer)
            return
        self._generate_openai(conversations, sampling, model, on_answer)

    def _generate_vllm(self, conversations: list[list[dict[str, str]]], sampling: SamplingParams,
                       on_answer: Callable[[int, list[str] | PromptTooLong], None]) -> None:
        vllm = _import_vllm()
        if vllm is None:
            raise LLMConfigError("the 'vllm' package is no longer importable")
        if self._vllm_llm is None:
            # Loading weights takes minutes, so it happens once per client and
            # only when something is not in the cache.
            log.info("loading %s into vLLM", self.model)
            self._vllm_llm = vllm.LLM(model=self.model, **self.vllm_kwargs)
        params = vllm.SamplingParams(
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            seed=sampling.seed,
            stop=sampling.stop_list(),
        )
        # vLLM refuses a whole batch for one prompt longer than the model's window: such a prompt is
        # refused here, alone, as a server refuses it (the other prompts are answered).
        refused = self._vllm_refusals(conversations)
        for position, refusal in refused.items():
            on_answer(position, refusal)
        positions = [i for i in range(len(conversations)) if i not in refused]
        if not positions:
            return
        outputs = self._vllm_llm.chat([conversations[i] for i in positions], sampling_params=params, use_tqdm=False)
        if len(outputs) != len(positions):
            raise LLMError(f"vLLM returned {len(outputs)} outputs for {len(positions)} prompts")
        with self._lock:
            self.stats["requests"] += 1
        for position, output in zip(positions, outputs):
            got = [completion.text for completion in output.outputs]
            if len(got) != sampling.n:
                raise LLMError(f"vLLM returned {len(got)} completions, expected n={sampling.n}")
            on_answer(position, got)
            prompt_ids = getattr(output, "prompt_token_ids", None)
            with self._lock:
                if prompt_ids is None:
                    self.stats["unmetered"] += 1
                else:
                    self.stats["prompt_tokens"] += len(prompt_ids)
                self.stats["completion_tokens"] += sum(len(getattr(c, "token_ids", None) or ()) for c in output.outputs)

    def _vllm_refusals(self, conversations: list[list[dict[str, str]]]) -> dict[int, PromptTooLong]:
        """The conversations whose prompt, in the model's chat template, is longer than its window."""
        window = self._vllm_llm.llm_engine.model_config.max_model_len
        tokenizer = self._vllm_llm.get_tokenizer()
        refused = {}
        for position, messages in enumerate(conversations):
            tokens = len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
            if tokens > window:
                refused[position] = PromptTooLong(
                    item=None, prompt_tokens=tokens, context_window=window,
                    server_message=f"prompt of {tokens} tokens is longer than max_model_len {window} (vLLM in process)")
        return refused

    def _generate_openai(self, conversations: list[list[dict[str, str]]], sampling: SamplingParams, model: str,
                         on_answer: Callable[[int, list[str] | PromptTooLong], None]) -> None:
        url = f"{self.base_url}/chat/completions"

        def ask(position: int) -> None:
            # On the worker thread, so that the answer is kept even if another request fails later.
            on_answer(position, self._chat_once(url, conversations[position], sampling, model))

        if len(conversations) == 1 or self.max_concurrency == 1:
            for position in range(len(conversations)):
                ask(position)
            return
        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(self.max_concurrency, len(conversations)), thread_name_prefix="openpert-llm"
        )
        try:
            futures = [pool.submit(ask, position) for position in range(len(conversations))]
            for future in concurrent.futures.as_completed(futures):
                # result() re-raises the first failure; the finally below drops the requests not yet
                # started, and waits for those in flight, whose answers are then cached too.
                future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _chat_once(self, url: str, messages: list[dict[str, str]], sampling: SamplingParams,
                   model: str) -> list[str] | PromptTooLong:
        """The ``n`` texts of one prompt, or the server's refusal of it as longer than the context window."""
        payload: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "n": sampling.n,
        }
        # Left out when unset rather than sent as null: some compatible
        # servers validate strictly and reject null fields.
        if sampling.seed is not None:
            payload["seed"] = int(sampling.seed)
        if sampling.stop is not None:
            payload["stop"] = sampling.stop_list()
        try:
            texts = self._choices(url, payload)
            if len(texts) > sampling.n or not texts:
                raise LLMError(f"{url} returned {len(texts)} choices for n={sampling.n}")
            if len(texts) < sampling.n:
                self._say_topping_up(url, len(texts), sampling.n)
                with self._lock:
                    # The progress the harness shows counts these requests too (PLANNED_HEADER).
                    self._planned_requests += sampling.n - len(texts)
            # A server that ignores n (llama-cpp-python's) answers one choice: each missing sample is
            # asked on its own, with the next seeds, so that the samples differ as n's would.
            for extra in range(1, sampling.n - len(texts) + 1):
                one = {**payload, "n": 1}
                if sampling.seed is not None:
                    one["seed"] = int(sampling.seed) + extra
                more = self._choices(url, one)
                if len(more) != 1:
                    raise LLMError(f"{url} returned {len(more)} choices for n=1")
                texts += more
        except _ContextRefused as exc:
            return exc.refusal
        return texts

    def _choices(self, url: str, payload: dict[str, Any]) -> list[str]:
        """Send one chat request; the texts of its choices, in index order (its usage counted)."""
        body = self._send_with_retries(url, payload)
        self._count_usage(body)
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list):
            raise LLMError(f"response from {url} has no 'choices' list: {str(body)[:300]}")
        choices = sorted(choices, key=lambda c: c.get("index", 0))
        texts = []
        for choice in choices:
            message = choice.get("message") or {}
            content = message.get("content")
            # content is null for e.g. a refusal or a pure tool call; an empty
            # text is what a scorer can handle.
            texts.append("" if content is None else str(content))
        return texts

    def _say_topping_up(self, url: str, got: int, n: int) -> None:
        with self._lock:
            said, self._topping_up_said = self._topping_up_said, True
        if not said:
            log.info("%s answered %d choices for n=%d; the other samples are asked one request each", url, got, n)

    def _count_usage(self, body: Any) -> None:
        """Add the tokens of a response's ``usage`` to :attr:`stats` (or count it as unmetered)."""
        usage = body.get("usage") if isinstance(body, dict) else None
        counts = [usage.get(k) if isinstance(usage, dict) else None for k in ("prompt_tokens", "completion_tokens")]
        with self._lock:
            # A server may omit usage or send null or negative counts; those are not added as tokens.
            if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
                self.stats["unmetered"] += 1
                return
            self.stats["prompt_tokens"] += counts[0]
            self.stats["completion_tokens"] += counts[1]

    # -- HTTP --------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   PLANNED_HEADER: str(self._planned_requests)}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self.retry_base_delay * (2**attempt)
        with self._lock:
            delay *= 1.0 + 0.25 * self._rng.random()
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.retry_max_delay)

    def _send_with_retries(self, url: str, payload: dict[str, Any] | None) -> Any:
        """POST ``payload`` (GET when ``None``) and return the decoded JSON body."""
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        last_error = ""
        last_status: int | None = None
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            if data is not None:
                with self._lock:
                    self.stats["requests"] += 1
            try:
                response = self._http.request("GET" if data is None else "POST", url, data, self._headers(), self.timeout)
            except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as exc:
                # Refused and dropped connections, timeouts, and URLError from a proxy's path.
                last_status = None
                last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            else:
                if response.status < 400:
                    try:
                        return json.loads(response.body)
                    except json.JSONDecodeError as exc:
                        raise LLMError(f"response from {url} is not JSON: {response.body[:300]!r}") from exc
                status = response.status
                server_message, code = _server_error(response)
                if status != 429 and not 500 <= status < 600:
                    message = f"LLM request to {url} failed with HTTP {status}: {server_message}"
                    refusal = _context_refusal(server_message, code)
                    if refusal is not None:
                        raise _ContextRefused(message, url=url, status=status, server_message=server_message,
                                              refusal=refusal)
                    raise LLMRequestError(message, url=url, status=status, server_message=server_message)
                last_status, last_error = status, f"HTTP {status}: {server_message}"
                retry_after = _retry_after(response)
            if attempt == self.max_retries:
                break
            delay = self._backoff(attempt, retry_after)
            with self._lock:
                self.stats["retries"] += 1
            log.warning("LLM request to %s failed (%s); retry %d/%d in %.2fs", url, last_error,
                        attempt + 1, self.max_retries, delay)
            time.sleep(delay)
        raise LLMRequestError(
            f"LLM request to {url} failed after {self.max_retries + 1} attempts: {last_error}",
            url=url,
            status=last_status,
            server_message=last_error,
        )

    def close(self) -> None:
        """Release the in-process vLLM engine, if one was loaded, and the idle connections."""
        self._vllm_llm = None
        if self._http is not None:
            self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _checked_sha256(value: str | None) -> str | None:
    """A configured SHA-256 in lower case, or ``None``; anything but 64 hexadecimal digits is an error."""
    if value is None:
        return None
    digest = str(value).strip().lower()
    if not _SHA256.fullmatch(digest):
        raise LLMConfigError(f"the model's SHA-256 (model_sha256 or ${ENV_MODEL_SHA256}) must be 64 hexadecimal "
                             f"digits, got {value!r}")
    return digest


def _checked_cap(value: object) -> int | None:
    """The cap on generated tokens as a positive int, or ``None``; anything else is an error."""
    if value is None:
        return None
    try:
        cap = int(str(value).strip())
    except ValueError:
        cap = 0
    if cap < 1:
        raise LLMConfigError(f"the cap on generated tokens (llm_max_tokens or ${ENV_MAX_TOKENS}) must be a whole "
                             f"number of at least 1, got {value!r}")
    return cap


def _local_model_sha256(model: str) -> str | None:
    """SHA-256 of a model that is a local file, or of a local folder's files; ``None`` for a hub id.

    A folder's digest is that of its files' relative paths and digests, in sorted order, so it
    changes when any file does. The weights are read once per client (seconds per gigabyte).
    """
    path = Path(model).expanduser()
    if path.is_file():
        return _file_sha256(path)
    if not path.is_dir():
        return None
    folder = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        folder.update(f"{file.relative_to(path).as_posix()}\0{_file_sha256(file)}\n".encode())
    return folder.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _server_error(response: Response) -> tuple[str, str | None]:
    """The error text of an HTTP error response (preferring OpenAI's ``error.message``) and its ``error.code``."""
    text = response.body.decode("utf-8", errors="replace")
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return text[:500] or http.client.responses.get(response.status, ""), None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            code = error.get("code")
            return str(error["message"]), None if code is None else str(code)
        if isinstance(error, str):
            return error, None
        for field in ("message", "detail"):
            if body.get(field):
                return str(body[field]), None
    return text[:500], None


#: How servers state a context window in their refusals: llama-cpp-python's and vLLM's
#: "This model's maximum context length is N tokens".
_WINDOW = re.compile(r"maximum context length is (\d+) tokens")
#: The prompt's tokens: "(P in the messages, ..." (llama-cpp-python, older vLLM), "your request has P input
#: tokens" and "your prompt contains at least P input tokens" (vLLM).
_PROMPT_TOKENS = re.compile(r"\((\d+) in the messages|(\d+) input tokens")
#: The completion's tokens: "..., C in the completion)", "is too large: C." and "requested C output tokens".
_COMPLETION_TOKENS = re.compile(r"(\d+) in the completion|is too large: (\d+)|requested (\d+) output tokens")


def _context_refusal(message: str, code: str | None) -> PromptTooLong | None:
    """What a client-error response says of a request longer than the context window; ``None`` if it is not one."""
    window = _WINDOW.search(message)
    if code != "context_length_exceeded" and window is None:
        return None
    prompt = _PROMPT_TOKENS.search(message)
    completion = _COMPLETION_TOKENS.search(message)
    return PromptTooLong(
        item=None,
        prompt_tokens=None if prompt is None else int(next(g for g in prompt.groups() if g is not None)),
        context_window=None if window is None else int(window.group(1)),
        completion_tokens=None if completion is None else int(next(g for g in completion.groups() if g is not None)),
        server_message=message,
    )


def _retry_after(response: Response) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (the HTTP-date form is ignored)."""
    value = response.header("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


_DISABLED = {"none", "off", "false", "no", "0", "disabled"}


def client_from_arguments(
    *,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    llm_model_sha256: str | None = None,
    llm_api_key: str | None = None,
    llm_backend: str | None = None,
    llm_cache_dir: str | None = None,
    llm_max_concurrency: int | None = None,
    llm_max_tokens: int | None = None,
    **options: Any,
) -> LLMClient:
    """Build a client from the values of the shared LLM argument group (``--llm_*``).

    A component passes its ``llm_*`` arguments, e.g.
    ``client_from_arguments(**{k: v for k, v in par.items() if k.startswith("llm_")})``.

    Parameters
    ----------
    llm_base_url, llm_model, llm_model_sha256, llm_api_key, llm_backend
        As :class:`LLMClient`'s ``base_url``, ``model``, ``model_sha256``, ``api_key``, ``backend``; a missing or
        ``None`` value falls back to the environment variable (or default) of :class:`LLMClient`.
    llm_cache_dir
        The generation cache; ``"none"`` (or ``"off"``, ``"false"``) disables it, empty or ``None``
        keeps the default.
    llm_max_concurrency
        Requests in flight at once.
    llm_max_tokens
        As :class:`LLMClient`'s ``max_tokens_cap`` (``None``: ``$OPENPERT_LLM_MAX_TOKENS``, else no cap).
    **options
        Passed on to :class:`LLMClient` (``max_retries``, ``timeout``, ...).

    Returns
    -------
    LLMClient
    """
    if llm_cache_dir is None or llm_cache_dir == "":
        cache_dir: Any = _DEFAULT
    elif str(llm_cache_dir).strip().lower() in _DISABLED:
        cache_dir = None
    else:
        cache_dir = llm_cache_dir
    settings: dict[str, Any] = {"base_url": llm_base_url, "model": llm_model, "model_sha256": llm_model_sha256,
                                "api_key": llm_api_key,
                                "backend": llm_backend, "cache_dir": cache_dir}
    if llm_max_concurrency is not None:
        settings["max_concurrency"] = int(llm_max_concurrency)
    if llm_max_tokens is not None:
        settings["max_tokens_cap"] = llm_max_tokens
    settings.update(options)
    return LLMClient(**settings)
