"""Tests of pertsci.llm_http: kept-alive connections, a server's closing them, proxies; through LLMClient and alone."""

from __future__ import annotations

import time

import pytest

from openpert.testing.llm_server import OpenAIStubServer
from pertsci import llm
from pertsci.llm import LLMClient, LLMRequestError
from pertsci.llm_http import HTTPTransport


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (llm.ENV_BASE_URL, llm.ENV_MODEL, llm.ENV_MODEL_SHA256, llm.ENV_API_KEY, llm.ENV_BACKEND, llm.ENV_CACHE,
                 "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)


def fast_client(server: OpenAIStubServer, **kwargs) -> LLMClient:
    options = {"base_url": server.base_url, "model": "test-model", "cache_dir": None, "retry_base_delay": 0.001}
    options.update(kwargs)
    return LLMClient(**options)


def test_transport_reads_every_answer_and_reuses_its_connection():
    with OpenAIStubServer() as server:
        transport = HTTPTransport(server.base_url)
        ok = transport.request("GET", f"{server.base_url}/models", None, {}, timeout=5)
        missing = transport.request("GET", f"{server.base_url}/nothing", None, {}, timeout=5)
        assert ok.status == 200 and b'"stub-model"' in ok.body
        assert missing.status == 404 and missing.header("content-type") == "application/json"
        assert transport.connections_opened == server.connections == 1
        transport.close()
    with pytest.raises(ValueError, match="not an http"):
        HTTPTransport("ftp://127.0.0.1/v1")


def test_a_proxy_the_environment_names_carries_requests_to_other_hosts(monkeypatch):
    # The stub stands in for the proxy: it is asked for the whole URL of the other host.
    with OpenAIStubServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.base_url.removesuffix("/v1"))
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        client = LLMClient(base_url="http://llm.invalid/v1", model="m", cache_dir=None, max_retries=0)
        with pytest.raises(LLMRequestError, match="HTTP 404: no route POST http://llm.invalid/v1/chat/completions"):
            client.generate(["x"])


def test_connections_are_kept_alive_one_per_request_in_flight():
    with OpenAIStubServer(delay=0.01, model="test-model") as server:
        client = fast_client(server, max_concurrency=4)
        for round_ in range(2):
            prompts = [f"p{round_}-{i}" for i in range(40)]
            assert client.generate(prompts) == [[f"echo: {p}"] for p in prompts]
        assert server.n_requests == 80
        assert server.max_in_flight == 4
        assert server.connections == client._http.connections_opened <= 4
        client.close()


def test_a_connection_the_server_closed_while_idle_is_opened_again_without_a_retry():
    with OpenAIStubServer(idle_timeout=0.1, model="test-model") as server:
        client = fast_client(server)
        assert client.generate(["a"]) == [["echo: a"]]
        time.sleep(0.4)  # the server closes the idle connection
        assert client.generate(["b"]) == [["echo: b"]]
        assert server.connections == 2
        assert (client.stats["requests"], client.stats["retries"]) == (2, 0)


def test_a_stopped_server_fails_the_request_on_its_reused_connection():
    server = OpenAIStubServer(model="test-model").start()
    client = fast_client(server, max_retries=1)
    assert client.generate(["a"]) == [["echo: a"]]
    server.stop()
    with pytest.raises(LLMRequestError, match="failed after 2 attempts"):
        client.generate(["b"])
    assert client.stats["retries"] == 1
