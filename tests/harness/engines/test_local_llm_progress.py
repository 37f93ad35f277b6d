"""The local engine's progress output for a running language-model job: answers out of planned, tokens/s."""

from __future__ import annotations

import json
import re
import socket

import pytest

from openpert.engines import local
from openpert.engines.local import LocalEngine, llm_progress_text
from openpert.run.llm_proxy import PLANNED_HEADER, LLMProgress, LLMProxy
from openpert.testing.llm_server import OpenAIStubServer


@pytest.mark.parametrize(("progress", "text"), [
    (LLMProgress(answered=37, planned=120, completion_tokens=1640, seconds=40.0), "37/120 answers, 41 tokens/s"),
    (LLMProgress(answered=1234, planned=5000, completion_tokens=50_000, seconds=40.0), "1,234/5,000 answers, 1,250 tokens/s"),
    (LLMProgress(answered=3, planned=120, completion_tokens=20, seconds=40.0), "3/120 answers, 0.5 tokens/s"),
    # no tokens reported yet (or a server without usage): no rate
    (LLMProgress(answered=0, planned=120, completion_tokens=0, seconds=2.0), "0/120 answers"),
    # a client that states no plan, or a plan smaller than what was answered: answers alone
    (LLMProgress(answered=37, planned=0, completion_tokens=400, seconds=40.0), "37 answers, 10 tokens/s"),
    (LLMProgress(answered=37, planned=20, completion_tokens=400, seconds=40.0), "37 answers, 10 tokens/s"),
    (LLMProgress(answered=120, planned=120, completion_tokens=400, seconds=40.0), "120/120 answers, 10 tokens/s"),
])
def test_the_progress_text_gives_answers_out_of_planned_and_tokens_per_second(progress, text):
    assert llm_progress_text(progress) == text


def post(proxy: LLMProxy, text: str, planned: int) -> None:
    """A chat request through the proxy's socket, as a job's client sends it."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(proxy.socket_path))
        body = json.dumps({"model": "stub-model", "messages": [{"role": "user", "content": text}]}).encode()
        sock.sendall(f"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n{PLANNED_HEADER}: {planned}\r\n\r\n".encode() + body)
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    assert response.startswith(b"HTTP/1.0 200"), response[:200]


def test_the_engine_shows_a_running_jobs_proxy_counts(tmp_path, capsys, monkeypatch):
    engine = LocalEngine(tmp_path / "out", progress="lines")
    with OpenAIStubServer() as server, LLMProxy(server.base_url, tmp_path / "llm.sock") as proxy:
        engine._watch_llm("k562_llm/summer", proxy)
        engine._tick()
        assert capsys.readouterr().err == ""  # no request yet, and no line due
        post(proxy, "one two", planned=5)
        post(proxy, "three", planned=5)
        engine._tick()
        assert capsys.readouterr().err == ""  # a line every LLM_LINE_INTERVAL_S seconds, not one per tick
        monkeypatch.setattr(local, "LLM_LINE_INTERVAL_S", 0.0)
        engine._tick()
        line = capsys.readouterr().err
        assert re.fullmatch(r"llm      k562_llm/summer 2/5 answers, [\d,.]+ tokens/s\n", line), line

        # On a terminal: beside the job's id in the running list, language-model jobs first (on a
        # terminal wide enough for the whole line: a narrower one cuts it).
        monkeypatch.setenv("COLUMNS", "200")
        engine.mode = "bar"
        engine._running |= {"k562_llm/summer", "k562_llm/mean"}
        engine._show()
        bar = capsys.readouterr().err
        assert re.search(r"running: k562_llm/summer \(2/5 answers, [\d,.]+ tokens/s\), k562_llm/mean", bar), bar
