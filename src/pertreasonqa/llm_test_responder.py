"""The stand-in model of pertreasonqa's LLM tests: answers like a model that follows the first path.

The component tests' responder (``info.test_llm``, loaded by the harness with ``src/pertreasonqa``
on the path) and the task tests' model, served by the harness's local OpenAI-format test server.
"""

from __future__ import annotations

from collections.abc import Mapping

from pertreasonqa_lib.answer_parsing import format_response
from pertreasonqa_lib.cell_state import STATE_NAMES, STATE_UNKNOWN
from pertreasonqa_lib.path_serialisation import parse_serialized_paths
from pertreasonqa_lib.sign_filters import predict_from_paths


def respond(request: Mapping) -> str:
    """A deterministic stand-in model for tests: answers from the prompt's first candidate path.

    Reads the numbered path lines of the last user message, propagates the perturbation's sign along
    the first path and applies the floor/ceiling rules to the effect gene's stated basal state (as
    :func:`predict_from_paths`), and replies in the task's format with that path's triplets; with
    no path it answers ``unchanged`` with no triplet.
    """
    messages = request.get("messages") or [{}]
    text = str(messages[-1].get("content", ""))
    paths = parse_serialized_paths(text)
    if not paths:
        return format_response("No path links the perturbation to the effect gene.", "unchanged", [])
    triplets, states = paths[0]
    code = {v: k for k, v in STATE_NAMES.items()}.get(states.get(triplets[-1][2], "unknown"), STATE_UNKNOWN)
    kind = "chemical" if "Perturbation: treatment with the compound" in text else "crispri"
    answer, _ = predict_from_paths([[t[1] for t in triplets]], kind, code)
    return format_response("The signal follows the first candidate path.", answer, triplets)
