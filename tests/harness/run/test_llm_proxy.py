"""The language-model proxy: it forwards to its one endpoint, refuses the rest, and counts what the server reports."""

from __future__ import annotations

import gzip
import http.client
import http.server
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from openpert.run.llm_proxy import MAX_PLANNED, PLANNED_HEADER, LLMProgress, LLMProxy, LLMProxyError, planned_claim, usage_of
from openpert.testing.llm_server import OpenAIStubServer, StubHTTPError


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection over a Unix socket (what the job's relay hands the proxy)."""

    def __init__(self, path: Path):
        super().__init__("localhost", timeout=10)
        self.unix_path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


def ask(path: Path, method: str, target: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    connection = UnixHTTPConnection(path)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, target, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def chat(text: str) -> dict:
    return {"model": "stub-model", "messages": [{"role": "user", "content": text}], "n": 2}


def test_usage_of_reads_json_streamed_and_compressed_bodies():
    body = json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}).encode()
    assert usage_of(body, "application/json") == {"prompt_tokens": 7, "completion_tokens": 3}
    assert usage_of(gzip.compress(body), "application/json", "gzip") == {"prompt_tokens": 7, "completion_tokens": 3}
    events = (b'data: {"choices": [{"delta": {"content": "a"}}], "usage": null}\n\n'
              b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}}\n\ndata: [DONE]\n\n')
    assert usage_of(events, "text/event-stream; charset=utf-8") == {"prompt_tokens": 5, "completion_tokens": 9}
    assert usage_of(b'{"choices": []}', "application/json") is None
    assert usage_of(b"not json", "application/json") is None
    # a negative or non-integer count is not believed
    assert usage_of(b'{"usage": {"prompt_tokens": -4, "completion_tokens": "9"}}', "application/json") == {
        "prompt_tokens": 0, "completion_tokens": 0}


def test_proxy_forwards_and_counts_the_servers_usage(tmp_path):
    with OpenAIStubServer() as server, LLMProxy(server.base_url, tmp_path / "llm.sock") as proxy:
        assert proxy.job_base_url(9000) == "http://127.0.0.1:9000/v1"
        status, models = ask(proxy.socket_path, "GET", "/v1/models")
        assert status == 200 and models["data"][0]["id"] == "stub-model"
        answers = [ask(proxy.socket_path, "POST", "/v1/chat/completions", chat(f"question number {i}")) for i in range(3)]
        assert [a[0] for a in answers] == [200, 200, 200]
        assert answers[0][1]["choices"][0]["message"]["content"] == "echo: question number 0"
        counts = proxy.counts
        assert server.n_requests == 3
    expected_prompt = sum(a[1]["usage"]["prompt_tokens"] for a in answers)
    expected_completion = sum(a[1]["usage"]["completion_tokens"] for a in answers)
    assert expected_prompt == 9 and expected_completion == 2 * 3 * 4  # n=2 answers of 4 words each
    assert counts == {"requests": 3, "prompt_tokens": expected_prompt, "completion_tokens": expected_completion,
                      "unmetered": 0}
    assert not (tmp_path / "llm.sock").exists()  # removed when the job ends


def test_proxy_forwards_only_under_the_base_path(tmp_path):
    with OpenAIStubServer() as server, LLMProxy(server.base_url, tmp_path / "llm.sock") as proxy:
        for target in ("/admin", "/v1x/models", "/v1/../admin", "http://example.org/v1/models"):
            status, body = ask(proxy.socket_path, "GET", target)
            assert status == 403, (target, status, body)
            assert "forwards /v1/... only" in body["error"]["message"]
        # the query reaches the server with the path (the stub routes on both, so it says "no route")
        status, body = ask(proxy.socket_path, "GET", "/v1/models?x=1")
        assert status == 404 and body["error"]["message"] == "no route GET /v1/models?x=1"
        assert proxy.counts["requests"] == 0  # GETs and refusals are no generation requests


def test_proxy_reports_an_unreachable_server_and_counts_errors_without_tokens(tmp_path):
    with OpenAIStubServer(status=429, status_message="slow down") as server:
        with LLMProxy(server.base_url, tmp_path / "a.sock") as proxy:
            status, body = ask(proxy.socket_path, "POST", "/v1/chat/completions", chat("hi"))
            assert status == 429 and body["error"]["message"] == "slow down"
            assert proxy.counts == {"requests": 1, "prompt_tokens": 0, "completion_tokens": 0, "unmetered": 0}
    with LLMProxy(server.base_url, tmp_path / "b.sock") as proxy:  # the server has stopped
        status, body = ask(proxy.socket_path, "POST", "/v1/chat/completions", chat("hi"))
    assert status == 502
    assert "could not reach http://127.0.0.1:" in body["error"]["message"]


def test_responses_without_usage_are_counted_as_unmetered(tmp_path, monkeypatch):
    server = OpenAIStubServer()
    real = server._answer_chat

    def no_usage(body, headers):
        status, payload, extra = real(body, headers)
        payload.pop("usage", None)
        return status, payload, extra

    monkeypatch.setattr(server, "_answer_chat", no_usage)
    with server, LLMProxy(server.base_url, tmp_path / "llm.sock") as proxy:
        assert ask(proxy.socket_path, "POST", "/v1/chat/completions", chat("hi"))[0] == 200
        assert proxy.counts == {"requests": 1, "prompt_tokens": 0, "completion_tokens": 0, "unmetered": 1}


def test_a_socket_path_longer_than_sun_path_is_served(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    assert len(str(deep / "llm.sock")) > 108  # too long for bind() itself
    with OpenAIStubServer() as server, LLMProxy(server.base_url, deep / "llm.sock") as proxy:
        assert (deep / "llm.sock").is_socket()
        folder = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
        try:
            status, _ = ask(Path(f"/proc/self/fd/{folder}/llm.sock"), "POST", "/v1/chat/completions", chat("hi"))
        finally:
            os.close(folder)
        assert status == 200 and proxy.counts["requests"] == 1


@pytest.mark.parametrize("url", ["ftp://host/v1", "127.0.0.1:8000/v1", "http:///v1", "http://host:99999/v1"])
def test_endpoints_that_cannot_be_proxied_are_refused(tmp_path, url):
    with pytest.raises(LLMProxyError, match="language-model endpoint"):
        LLMProxy(url, tmp_path / "llm.sock")


def test_streamed_responses_pass_event_by_event_and_their_usage_is_counted(tmp_path):
    events = [b'data: {"choices": [{"delta": {"content": "TP53"}}]}\n\n',
              b'data: {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2}}\n\n', b"data: [DONE]\n\n"]

    class Streaming(http.server.BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's signature
            return

        def do_POST(self):  # noqa: N802 - the base class's name
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in events:
                self.wfile.write(event)
                self.wfile.flush()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Streaming)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with LLMProxy(f"http://127.0.0.1:{server.server_address[1]}/v1", tmp_path / "llm.sock") as proxy:
            connection = UnixHTTPConnection(proxy.socket_path)
            connection.request("POST", "/v1/chat/completions", body=json.dumps(chat("hi") | {"stream": True}))
            response = connection.getresponse()
            assert response.getheader("Content-Type") == "text/event-stream"
            assert response.read() == b"".join(events)
            connection.close()
            assert proxy.counts == {"requests": 1, "prompt_tokens": 11, "completion_tokens": 2, "unmetered": 0}
    finally:
        server.shutdown()
        server.server_close()


def test_the_proxy_sends_its_own_api_key_in_place_of_the_jobs(tmp_path):
    with OpenAIStubServer() as server, LLMProxy(server.base_url, tmp_path / "llm.sock", api_key="sk-harness") as proxy:
        connection = UnixHTTPConnection(proxy.socket_path)
        connection.request("POST", "/v1/chat/completions", body=json.dumps(chat("hi")),
                           headers={"Authorization": "Bearer sk-job", "Content-Type": "application/json"})
        assert connection.getresponse().status == 200
        connection.close()
        seen = {k.lower(): v for k, v in server.headers[0].items()}
    assert seen["authorization"] == "Bearer sk-harness"
    assert seen["host"] == server.base_url.split("/")[2]  # the configured host, not the job's relay


def test_the_planned_header_is_recorded_and_never_reaches_the_server(tmp_path, caplog):
    answers = iter(["ok", "ok", StubHTTPError(500, "busy"), "ok"])

    def responder(request: dict) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with OpenAIStubServer(responder) as server, LLMProxy(server.base_url, tmp_path / "llm.sock") as proxy:
        assert proxy.progress == LLMProgress(answered=0, planned=0, completion_tokens=0, seconds=None)
        assert ask(proxy.socket_path, "GET", "/v1/models", headers={PLANNED_HEADER: "7"})[0] == 200
        # A GET is no generation request: neither its claim nor its time counts.
        assert proxy.progress == LLMProgress(answered=0, planned=0, completion_tokens=0, seconds=None)
        sent = ["3", "5", "4", "nine"]  # requests in flight may carry an older count: the largest is kept
        statuses = [ask(proxy.socket_path, "POST", "/v1/chat/completions", chat(f"q{i}"), {PLANNED_HEADER: value})[0]
                    for i, value in enumerate(sent)]
        time.sleep(0.05)
        progress = proxy.progress
        seen = [{k.lower() for k in headers} for headers in server.headers]
    assert statuses == [200, 200, 500, 200]
    # Answers are the successful responses; the failed one counts as a request only.
    assert progress.answered == 3 and proxy.counts["requests"] == 4
    assert progress.planned == 5  # "nine" is ignored, with a warning
    assert progress.completion_tokens == proxy.counts["completion_tokens"] == 3 * 2 * 1
    assert progress.seconds is not None and progress.seconds >= 0.05
    assert progress.tokens_per_second == pytest.approx(progress.completion_tokens / progress.seconds)
    assert all(PLANNED_HEADER.lower() not in headers for headers in seen) and len(seen) == 4
    assert [r.getMessage() for r in caplog.records if PLANNED_HEADER in r.getMessage()] == [
        f"llm proxy: ignoring {PLANNED_HEADER} 'nine' (not a whole number up to {MAX_PLANNED}); the progress output "
        "shows no planned count for it"]


@pytest.mark.parametrize(("value", "claim"), [("120", 120), (" 120 ", 120), ("0", 0), (str(MAX_PLANNED), MAX_PLANNED),
                                              (str(MAX_PLANNED + 1), None), ("9" * 400, None), ("-3", None),
                                              ("1e3", None), ("١٢", None), ("", None), (None, None)])
def test_a_planned_claim_is_a_bounded_whole_number(value, claim):
    assert planned_claim(value) == claim


def test_the_client_and_the_proxy_name_the_same_header():
    from pertsci.llm import PLANNED_HEADER as CLIENT_HEADER

    assert CLIENT_HEADER == PLANNED_HEADER


def test_no_rate_without_tokens():
    assert LLMProgress(answered=2, planned=4, completion_tokens=0, seconds=3.0).tokens_per_second is None
    assert LLMProgress(answered=0, planned=4, completion_tokens=0, seconds=None).tokens_per_second is None
    assert LLMProgress(answered=2, planned=4, completion_tokens=30, seconds=3.0).tokens_per_second == 10.0
