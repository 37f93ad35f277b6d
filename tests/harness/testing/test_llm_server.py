"""Tests of the OpenAI-compatible stub server that unit tests talk to."""

import http.client
import json
from concurrent.futures import ThreadPoolExecutor

from openpert.testing.llm_server import OpenAIStubServer


def _ask(port: int, prompt: str) -> str | None:
    """The answer to one chat request on a fresh connection; ``None`` when the server gave none."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"model": "stub", "messages": [{"role": "user", "content": prompt}]})
    try:
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return json.loads(response.read())["choices"][0]["message"]["content"]
    except (ConnectionError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def test_a_dying_server_delivers_every_answer_it_counted_before_it_goes():
    # Answers written at once: the one that makes the server die must not cut
    # the others short, or a client holds fewer answers than `answered` says.
    # Long answers take a while to write, so the writes overlap.
    long_answer = "ok " * 1_000_000
    for round_ in range(5):
        with OpenAIStubServer(lambda body: long_answer, die_after=6) as dying:
            port = dying.bound_port
            with ThreadPoolExecutor(max_workers=8) as pool:
                answers = list(pool.map(lambda i: _ask(port, f"q{i}"), range(8)))
        assert dying.answered == 6
        assert answers.count(long_answer) == 6, f"round {round_}: {[a if a is None else len(a) for a in answers]}"
