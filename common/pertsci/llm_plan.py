"""What a language-model run costs in prompts: token counts, prefix sharing and the dry-run record.

Three pieces, used by :class:`pertsci.llm.LLMClient` and by the harness's ``--dry-run``:

* :func:`prompt_text` renders a conversation as the text its counting is based on;
  :func:`prefix_order` orders requests by their messages (:func:`prompt_key`), so that prompts sharing a prefix (the same
  perturbation, the same retrieved context) are sent one after the other, which is what vLLM's
  automatic prefix caching rewards: the key-value cache of a shared prefix is computed once and
  reused while it is still resident.
* :class:`TokenCounter` counts tokens with a model's own tokenizer (a local ``tokenizer.json`` read
  with the ``tokenizers`` package) or, without one, approximates them as characters / 4 (the usual
  rule of thumb for English text with BPE tokenizers), and says which it did.
* :func:`plan_requests` summarises one batch of requests (prompts, samples, prompt tokens, and the
  tokens each prompt shares with the one sent before it, in the caller's order and in prefix
  order); :func:`plan_line` writes that summary as one marked log line, which is how a component in
  dry-run mode reports what it would send (the harness reads these lines from the job logs).

The counts are of the message texts; the chat template adds a few tokens per message that are not
counted.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ENV_TOKENIZER",
    "ENV_DRY_RUN_ANSWER_CHARS",
    "PLAN_MARK",
    "CHARS_PER_TOKEN",
    "TokenCounter",
    "prompt_text",
    "prompt_key",
    "prefix_order",
    "plan_requests",
    "plan_line",
    "placeholder_answer",
]

#: A local ``tokenizer.json`` of the model, to count prompt tokens exactly.
ENV_TOKENIZER = "OPENPERT_LLM_TOKENIZER"
#: Length in characters of the placeholder a dry run answers with (default :data:`DEFAULT_ANSWER_CHARS`).
ENV_DRY_RUN_ANSWER_CHARS = "OPENPERT_LLM_DRY_RUN_ANSWER_CHARS"
#: Start of the log line a dry run writes for each batch of requests (the harness's
#: ``openpert.engines.dry_run`` reads these lines from job logs).
PLAN_MARK = "openpert-llm-plan "
#: Characters per token of the approximation used without a tokenizer.
CHARS_PER_TOKEN = 4
#: A generated text reused in later prompts (a SUMMER gene summary) is about a paragraph long.
DEFAULT_ANSWER_CHARS = 1000

_FILLER = ("The gene encodes a protein that takes part in transcription, signalling and the regulation of "
           "cell growth; it interacts with partners in the same complex and pathway. ")


def prompt_text(messages: Sequence[Mapping[str, str]]) -> str:
    """One conversation as text: each message as ``role`` then ``content`` on its own lines.

    Two conversations share a prefix of this text exactly when their first messages agree up to
    that point, so it is the key both of the send order and of the prefix counts.
    """
    return "".join(f"{m['role']}\n{m['content']}\n" for m in messages)


def prompt_key(messages: Sequence[Mapping[str, str]]) -> tuple[tuple[str, str], ...]:
    """The send-order key of a conversation: its ``(role, content)`` pairs.

    Tuples compare message by message, so conversations sharing their first messages sort
    together, as their :func:`prompt_text` would, without copying prompts of tens of kilobytes.
    """
    return tuple((m["role"], m["content"]) for m in messages)


def prefix_order(conversations: Sequence[Sequence[Mapping[str, str]]]) -> list[int]:
    """Indices of ``conversations`` in lexicographic order of :func:`prompt_key` (ties keep the caller's order).

    Sorting puts every group of prompts sharing a prefix next to each other, with the longest shared
    prefixes adjacent: for any three texts a <= b <= c, the prefix of a and c is also b's.
    """
    keys = [prompt_key(c) for c in conversations]
    return sorted(range(len(keys)), key=keys.__getitem__)


class TokenCounter:
    """Count prompt tokens with a model's tokenizer, or approximate them as characters / 4.

    Parameters
    ----------
    tokenizer_file : path, optional
        A Hugging Face ``tokenizer.json`` (the file beside a model's weights). Default
        ``$OPENPERT_LLM_TOKENIZER``; without either, the approximation is used.

    Raises
    ------
    FileNotFoundError
        When the file named does not exist.
    ValueError
        When it cannot be read as a tokenizer.
    """

    def __init__(self, tokenizer_file: str | os.PathLike | None = None):
        if tokenizer_file is None:
            tokenizer_file = os.environ.get(ENV_TOKENIZER) or None
        self._tokenizer = None
        if tokenizer_file is None:
            self.method = f"approximation: characters / {CHARS_PER_TOKEN}"
            return
        path = Path(tokenizer_file).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no tokenizer file (expected a model's tokenizer.json)")
        from tokenizers import Tokenizer  # noqa: PLC0415 - optional dependency, only with a tokenizer file

        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # tokenizers raises its own exception type for a malformed file
            raise ValueError(f"{path}: not a tokenizer.json the tokenizers package can read: {err}") from err
        self.method = f"tokenizer: {path}"

    @property
    def exact(self) -> bool:
        """Whether a real tokenizer counts (else the approximation)."""
        return self._tokenizer is not None

    def _ids(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        if self._tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self._ids(text))

    def shared_prefix_tokens(self, texts: Iterable[str]) -> int:
        """Tokens each text shares at its start with the text before it, summed over the sequence.

        This is what a prefix cache that keeps the previous request's prefix can reuse. With the
        approximation, the common prefix in characters is divided by :data:`CHARS_PER_TOKEN`
        (rounded down); with a tokenizer, the common prefix of the token ids is counted.
        """
        total, previous = 0, None
        for text in texts:
            current = text if self._tokenizer is None else self._ids(text)
            if previous is not None:
                common = _common_prefix_length(previous, current)
                total += common // CHARS_PER_TOKEN if self._tokenizer is None else common
            previous = current
        return total


def _common_prefix_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common prefix of two sequences (strings or token id lists)."""
    n = min(len(a), len(b))
    if isinstance(a, str):
        # Halving on slices runs in C, which matters for prompts of tens of kilobytes.
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if a[:mid] == b[:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_requests(conversations: Sequence[Sequence[Mapping[str, str]]], n: int, counter: TokenCounter, *,
                  max_tokens: int | None = None, repeated: int = 0) -> dict[str, Any]:
    """What one batch of requests costs: the summary a dry run records.

    Parameters
    ----------
    conversations
        The prompts that would be sent (after removing repeats), in the caller's order, each a list
        of chat messages; they are counted as :func:`prompt_text` renders them, one at a time.
    n
        Completions asked per prompt.
    counter
        How tokens are counted.
    max_tokens
        The completion limit per sample, recorded so that the worst-case generated tokens follow.
    repeated
        Prompts of the batch not sent because they repeat one already sent (a cache hit in a real run).

    Returns
    -------
    dict
        ``requests`` (prompts sent), ``repeated``, ``n``, ``samples`` (requests x n),
        ``prompt_tokens`` (each prompt counted once: with ``n`` > 1 the server fills the prompt
        once), ``max_prompt_tokens`` (the longest prompt's tokens, what the model's context window must
        hold besides the completion), ``max_completion_tokens`` (samples x max_tokens), ``shared_prefix_tokens_caller_order``
        and ``shared_prefix_tokens_prefix_order`` (tokens shared with the previous request, as sent
        unsorted and in :func:`prefix_order`) and ``token_count`` (how tokens were counted).
    """
    order = prefix_order(conversations)
    tokens = [counter.count(prompt_text(c)) for c in conversations]
    return {
        "requests": len(conversations),
        "repeated": int(repeated),
        "n": int(n),
        "samples": len(conversations) * int(n),
        "prompt_tokens": sum(tokens),
        "max_prompt_tokens": max(tokens, default=0),
        "max_completion_tokens": None if max_tokens is None else len(conversations) * int(n) * int(max_tokens),
        "shared_prefix_tokens_caller_order": counter.shared_prefix_tokens(prompt_text(c) for c in conversations),
        "shared_prefix_tokens_prefix_order": counter.shared_prefix_tokens(prompt_text(conversations[i]) for i in order),
        "token_count": counter.method,
    }


def plan_line(record: Mapping[str, Any]) -> str:
    """The log line of one batch's plan: :data:`PLAN_MARK` then the record as JSON."""
    return PLAN_MARK + json.dumps(dict(record), sort_keys=True)


def placeholder_answer(chars: int | None = None, prompt: str = "") -> str:
    """The text a dry run answers ``prompt`` with: plain English of ``chars`` characters.

    A component may put a generated text into a later prompt (SUMMER's gene summaries enter its
    questions), so the placeholder stands in for a typical answer's length; its default,
    :data:`DEFAULT_ANSWER_CHARS`, is set by ``$OPENPERT_LLM_DRY_RUN_ANSWER_CHARS``. It begins with
    a digest of the prompt: two questions built from the summaries of different genes must stay
    two prompts (a prompt that names no gene, only its summaries, would otherwise collapse into
    one and be counted once).
    """
    if chars is None:
        raw = os.environ.get(ENV_DRY_RUN_ANSWER_CHARS) or str(DEFAULT_ANSWER_CHARS)
        try:
            chars = int(raw)
        except ValueError:
            raise ValueError(f"${ENV_DRY_RUN_ANSWER_CHARS}={raw!r}: expected a whole number of characters") from None
    if chars < 0:
        raise ValueError(f"a placeholder answer cannot have {chars} characters")
    text = f"Answer {hashlib.sha256(prompt.encode()).hexdigest()[:16]}. " + _FILLER * (chars // len(_FILLER) + 1)
    return text[:chars]
