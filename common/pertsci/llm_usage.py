"""The account of a component's language-model use, as it writes it into its output's ``uns``.

Every component that calls a language model stores one flat mapping of counts under
``uns["llm_usage"]`` of its output (a prediction, or a judge metric's score file); the harness
reads it back, checks it and shows it per method and dataset (``docs/results_json.md``,
``llm_usage``). Its keys are :data:`USAGE_KEYS`:

``questions``    questions the component asked the model (items it scores from answers);
``samples``      answers it parsed for them (``n`` samples per question);
``abstentions``  of those samples, the ones that gave no usable answer: an explicit abstention
                 ("insufficient evidence") or a text the task's parser cannot read;
``fallbacks``    questions left without any usable sample, scored with the task's default
                 (e.g. a gene's training prevalence in PerturbQA) instead of the model's answer;

and the client's counters (:data:`pertsci.llm.STATS_KEYS`): ``prompts``, ``generated``,
``cache_hits``, ``requests``, ``retries``, ``prompt_tokens``, ``completion_tokens``,
``unmetered``, ``failed`` (prompts longer than the model's context window, answered with empty
texts: their samples are abstentions) and ``context_window`` (the window the server stated when
it refused them, 0 otherwise). Summaries and other intermediate generations count in the client's
counters, not in ``questions``.

A component also writes ``uns["llm_failures"]`` (:func:`failure_notes`): one line per prompt
refused as too long, naming its item, also printed to the job's log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pertsci.llm import LARGEST_KEYS, STATS_KEYS, PromptTooLong

__all__ = ["ANSWER_KEYS", "USAGE_KEYS", "AnswerTally", "usage_record", "failure_notes"]

#: Counts of the parsed answers, kept by :class:`AnswerTally`.
ANSWER_KEYS = ("questions", "samples", "abstentions", "fallbacks")
#: Every key of ``uns["llm_usage"]``.
USAGE_KEYS = ANSWER_KEYS + tuple(k for k in STATS_KEYS if k != "samples")


@dataclasses.dataclass
class AnswerTally:
    """Counts of a component's parsed answers: questions, samples, abstentions and fallbacks."""

    questions: int = 0
    samples: int = 0
    abstentions: int = 0
    fallbacks: int = 0

    def add_question(self, outcomes: Sequence[object], abstained: object = None) -> bool:
        """Count one question from its samples' parsed outcomes.

        Parameters
        ----------
        outcomes
            The parsed outcome of each sample of the question.
        abstained
            The outcome that means "no usable answer" (e.g. PerturbQA's ``ABSTAIN``, or ``None``).

        Returns
        -------
        bool
            Whether the question fell back to the default (no sample gave an answer).
        """
        missing = sum(1 for v in outcomes if v == abstained)
        self.questions += 1
        self.samples += len(outcomes)
        self.abstentions += missing
        fell_back = missing == len(outcomes)
        self.fallbacks += int(fell_back)
        return fell_back

    def add_questions(self, outcomes: Iterable[Sequence[object]], abstained: object = None) -> None:
        """:meth:`add_question` for each question's outcomes."""
        for one in outcomes:
            self.add_question(one, abstained)

    def add_counts(self, *, questions: int, samples: int, abstentions: int, fallbacks: int) -> None:
        """Add counts a task's own scoring function returned."""
        self.questions += int(questions)
        self.samples += int(samples)
        self.abstentions += int(abstentions)
        self.fallbacks += int(fallbacks)


def usage_record(stats: Mapping[str, int] | Iterable[Mapping[str, int]], tally: AnswerTally) -> dict[str, int]:
    """The ``uns["llm_usage"]`` mapping of a component.

    Parameters
    ----------
    stats
        :attr:`pertsci.llm.LLMClient.stats` of the client the component used, or of each of its
        clients (summed; ``context_window`` the largest).
    tally
        The component's parsed answers.

    Returns
    -------
    dict
        Every key of :data:`USAGE_KEYS`, a non-negative integer.

    Raises
    ------
    ValueError
        When the tally is inconsistent (more abstentions than samples, more fallbacks than questions).
    """
    if isinstance(stats, Mapping):
        stats = [stats]
    totals = dict.fromkeys(STATS_KEYS, 0)
    for one in stats:
        for key in STATS_KEYS:
            value = int(one.get(key, 0))
            totals[key] = max(totals[key], value) if key in LARGEST_KEYS else totals[key] + value
    counts = dataclasses.asdict(tally)
    if not 0 <= counts["abstentions"] <= counts["samples"] or not 0 <= counts["fallbacks"] <= counts["questions"]:
        raise ValueError(f"inconsistent answer counts {counts}: abstentions must be at most the samples and "
                         "fallbacks at most the questions")
    return {key: int(counts[key] if key in counts else totals[key]) for key in USAGE_KEYS}


def failure_notes(failures: Iterable[PromptTooLong]) -> np.ndarray:
    """The ``uns["llm_failures"]`` entry of a component: one line per prompt refused as too long, each printed.

    Parameters
    ----------
    failures
        :attr:`pertsci.llm.LLMClient.failures` of the component's client (or of each, chained).

    Returns
    -------
    numpy.ndarray
        The lines (:meth:`pertsci.llm.PromptTooLong.describe`) as strings, empty when no prompt
        was refused, ready for an h5ad's ``uns``.
    """
    lines = [failure.describe() for failure in failures]
    for line in lines:
        # In the job's log, so the items that took the task's default are named there too.
        print(line, flush=True)
    return np.asarray(lines, dtype=str)
