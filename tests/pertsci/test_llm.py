"""Tests of pertsci.llm against the local stub server and a fake vllm module."""

from __future__ import annotations

import json
import sys
import threading
import types

import pytest

from openpert.testing.llm_server import OpenAIStubServer, StubHTTPError
from pertsci import llm
from pertsci.llm import (
    LLMClient,
    LLMConfigError,
    LLMRequestError,
    SamplingParams,
    client_from_arguments,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    # The developer's own configuration must not leak into the tests.
    for name in (llm.ENV_BASE_URL, llm.ENV_MODEL, llm.ENV_MODEL_SHA256, llm.ENV_API_KEY, llm.ENV_BACKEND, llm.ENV_CACHE):
        monkeypatch.delenv(name, raising=False)


#: The model names these tests ask a stub for: a client asks only for a model its server lists.
SERVED = ("test-model", "other", "env-model")


def stub(responder=None, **kwargs) -> OpenAIStubServer:
    """A stub server listing :data:`SERVED`."""
    return OpenAIStubServer(responder, model=SERVED, **kwargs)


def fast_client(server: OpenAIStubServer, **kwargs) -> LLMClient:
    options = {"base_url": server.base_url, "model": "test-model", "cache_dir": None, "retry_base_delay": 0.001}
    options.update(kwargs)
    return LLMClient(**options)


def test_request_json_and_order():
    def responder(req):
        content = req["messages"][-1]["content"]
        return [f"{content}#{i}" for i in range(req["n"])]

    with stub(responder) as server:
        client = fast_client(server, api_key="secret")
        sampling = SamplingParams(temperature=0.3, top_p=0.9, max_tokens=17, n=2, seed=42, stop=["\n\n"])
        out = client.generate(["alpha", [{"role": "system", "content": "be brief"}, {"role": "user", "content": "beta"}]],
                              sampling)
    assert out == [["alpha#0", "alpha#1"], ["beta#0", "beta#1"]]
    by_content = {r["messages"][-1]["content"]: r for r in server.requests}
    req = by_content["alpha"]
    assert req["model"] == "test-model"
    assert req["messages"] == [{"role": "user", "content": "alpha"}]
    assert (req["n"], req["seed"], req["temperature"], req["top_p"], req["max_tokens"]) == (2, 42, 0.3, 0.9, 17)
    assert req["stop"] == ["\n\n"]
    assert by_content["beta"]["messages"][0] == {"role": "system", "content": "be brief"}
    assert all(h.get("Authorization") == "Bearer secret" for h in server.headers)


def test_seed_left_out_when_unset():
    with stub() as server:
        fast_client(server).generate(["x"], SamplingParams())
    assert "seed" not in server.requests[0] and "stop" not in server.requests[0]


def test_many_prompts_concurrently_in_order():
    prompts = [f"p{i}" for i in range(40)]
    with stub(delay=0.02) as server:
        client = fast_client(server, max_concurrency=8)
        out = client.generate(prompts, SamplingParams(n=1))
    assert out == [[f"echo: p{i}"] for i in range(40)]
    assert server.n_requests == 40
    assert 1 < server.max_in_flight <= 8


def test_retry_after_server_errors():
    with stub(lambda req: "ok", fail_first=2) as server:
        client = fast_client(server)
        assert client.generate(["hi"]) == [["ok"]]
    assert server.n_requests == 3
    assert client.stats["retries"] == 2


def test_retry_on_429_and_give_up():
    with stub(status=429, status_message="slow down") as server:
        client = fast_client(server, max_retries=2)
        with pytest.raises(LLMRequestError, match="after 3 attempts.*429.*slow down"):
            client.generate(["hi"])
    assert server.n_requests == 3


def test_client_error_fails_at_once():
    with stub(status=400, status_message="model 'x' does not exist") as server:
        client = fast_client(server)
        with pytest.raises(LLMRequestError) as info:
            client.generate(["hi"])
    assert server.n_requests == 1
    message = str(info.value)
    assert "400" in message and "does not exist" in message and server.base_url in message
    assert info.value.status == 400


def test_responder_can_raise_http_error():
    def responder(req):
        raise StubHTTPError(422, "bad field")

    with stub(responder) as server:
        with pytest.raises(LLMRequestError, match="422: bad field"):
            fast_client(server).generate(["hi"])


def test_connection_refused_is_retried_then_reported():
    with stub() as server:
        url = server.base_url
    # The server is stopped: nothing listens on the port any more.
    client = LLMClient(base_url=url, model="m", cache_dir=None, max_retries=1, retry_base_delay=0.001)
    with pytest.raises(LLMRequestError, match="after 2 attempts"):
        client.generate(["hi"])


def test_cache_hits_make_no_request(tmp_path):
    with stub(lambda req: f"seed={req.get('seed')}") as server:
        client = fast_client(server, cache_dir=tmp_path)
        first = client.generate(["a", "b"], SamplingParams(seed=1))
        assert server.n_requests == 2
        again = fast_client(server, cache_dir=tmp_path).generate(["a", "b"], SamplingParams(seed=1))
        assert again == first == [["seed=1"], ["seed=1"]]
        assert server.n_requests == 2
        new_seed = client.generate(["a"], SamplingParams(seed=2))
        assert new_seed == [["seed=2"]]
        assert server.n_requests == 3
        # Another model name is another experiment.
        fast_client(server, cache_dir=tmp_path, model="other").generate(["a"], SamplingParams(seed=1))
        assert server.n_requests == 4
    files = sorted(tmp_path.rglob("*.json"))
    assert len(files) == 4
    for path in files:
        entry = json.loads(path.read_text())
        assert path.stem == entry["key"] and isinstance(entry["texts"], list)
    assert not list(tmp_path.rglob("*.tmp"))


def test_cache_deduplicates_within_a_call(tmp_path):
    with stub() as server:
        out = fast_client(server, cache_dir=tmp_path).generate(["same", "same", "other"])
    assert out == [["echo: same"], ["echo: same"], ["echo: other"]]
    assert server.n_requests == 2


def test_each_request_says_how_many_requests_the_client_has_planned_so_far(tmp_path):
    # The count is of requests (one per uncached distinct prompt, whatever n), summed over generate calls.
    with stub(fail_first=1) as server:
        client = fast_client(server, cache_dir=tmp_path, max_concurrency=2)
        client.generate(["a", "b", "a"], SamplingParams(n=2))
        first = len(server.headers)
        client.generate(["a", "c", "d"], SamplingParams(n=2))  # "a" is cached
        client.generate(["a", "c"], SamplingParams(n=2))  # nothing to send
        planned = [h.get(llm.PLANNED_HEADER) for h in server.headers]
    # The first request failed once and was sent again, with the same count.
    assert first == 3 and planned == ["2", "2", "2", "4", "4"]


def test_corrupt_cache_entry_is_regenerated(tmp_path):
    with stub() as server:
        client = fast_client(server, cache_dir=tmp_path)
        client.generate(["a"])
        (path,) = tmp_path.rglob("*.json")
        path.write_text("{not json")
        assert client.generate(["a"]) == [["echo: a"]]
        assert server.n_requests == 2
    assert json.loads(path.read_text())["texts"] == ["echo: a"]


def test_model_discovered_from_server():
    with OpenAIStubServer(model="served-name") as server:
        client = LLMClient(base_url=server.base_url, cache_dir=None)
        client.generate(["x"])
    assert server.requests[0]["model"] == "served-name"


def test_configuration_from_environment(monkeypatch, tmp_path):
    with stub() as server:
        monkeypatch.setenv(llm.ENV_BASE_URL, server.base_url)
        monkeypatch.setenv(llm.ENV_MODEL, "env-model")
        monkeypatch.setenv(llm.ENV_CACHE, str(tmp_path))
        client = LLMClient()
        assert client.backend == "openai" and client.cache_dir == tmp_path
        client.generate(["x"])
    assert server.requests[0]["model"] == "env-model"


def test_missing_configuration_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(llm, "_import_vllm", lambda: None)
    with pytest.raises(LLMConfigError, match="OPENPERT_LLM_BASE_URL"):
        LLMClient()
    # A model alone is not enough without vllm.
    with pytest.raises(LLMConfigError, match="no LLM configured"):
        LLMClient(model="/models/x")
    with pytest.raises(LLMConfigError, match="not importable"):
        LLMClient(model="/models/x", backend="vllm")
    with pytest.raises(LLMConfigError, match="unknown LLM backend"):
        LLMClient(base_url="http://127.0.0.1:1/v1", backend="tgi")


def test_client_from_arguments(monkeypatch, tmp_path):
    monkeypatch.setenv(llm.ENV_API_KEY, "from-env")
    par = {
        "llm_base_url": "http://127.0.0.1:9/v1/",
        "llm_model": "m",
        "llm_api_key": None,
        "llm_backend": None,
        "llm_cache_dir": str(tmp_path),
        "llm_max_concurrency": "3",
    }
    client = client_from_arguments(**par, max_retries=0)
    assert (client.base_url, client.model, client.api_key) == ("http://127.0.0.1:9/v1", "m", "from-env")
    assert (client.backend, client.cache_dir, client.max_concurrency, client.max_retries) == (
        "openai", tmp_path, 3, 0)
    assert client_from_arguments(**{**par, "llm_cache_dir": "none"}).cache_dir is None
    assert client_from_arguments(**{**par, "llm_model_sha256": "A" * 64}).model_sha256 == "a" * 64
    with pytest.raises(TypeError):
        client_from_arguments(**{**par, "llm_temperature": 0.5})  # not an argument of the group


def test_generate_rejects_a_bare_prompt():
    client = LLMClient(base_url="http://127.0.0.1:9/v1", model="m", cache_dir=None)
    with pytest.raises(TypeError):
        client.generate("one prompt")
    with pytest.raises(TypeError):
        client.generate([{"role": "user", "content": "x"}])
    assert client.generate([]) == []


# -- vllm backend -----------------------------------------------------------


def make_fake_vllm():
    """A stand-in for the vllm package that records what it is asked."""
    module = types.ModuleType("vllm")
    module.calls = {"init": [], "chat": []}
    module.max_model_len = 4096

    class FakeSamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class FakeTokenizer:
        def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=True):
            # A word a token, and two for the template's turn markers.
            return list(range(2 + sum(len(m["content"].split()) for m in messages)))

    class FakeLLM:
        def __init__(self, model, **kwargs):
            module.calls["init"].append({"model": model, **kwargs})
            self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=module.max_model_len))

        def get_tokenizer(self):
            return FakeTokenizer()

        def chat(self, conversations, sampling_params=None, use_tqdm=True):
            module.calls["chat"].append((conversations, sampling_params.kwargs))
            n = sampling_params.kwargs["n"]
            return [
                types.SimpleNamespace(
                    outputs=[types.SimpleNamespace(text=f"{conv[-1]['content']}/{i}") for i in range(n)]
                )
                for conv in conversations
            ]

    module.LLM = FakeLLM
    module.SamplingParams = FakeSamplingParams
    return module


def test_vllm_backend_with_fake_module(monkeypatch, tmp_path):
    fake = make_fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    client = LLMClient(model="/models/tiny", cache_dir=tmp_path, vllm_kwargs={"tensor_parallel_size": 1})
    assert client.backend == "vllm"
    sampling = SamplingParams(n=3, seed=7, temperature=0.5, top_p=0.8, max_tokens=9, stop="END")
    out = client.generate(["a", "b"], sampling)
    assert out == [["a/0", "a/1", "a/2"], ["b/0", "b/1", "b/2"]]
    assert fake.calls["init"] == [{"model": "/models/tiny", "tensor_parallel_size": 1}]
    (conversations, params), = fake.calls["chat"]
    assert conversations == [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    assert params == {"n": 3, "temperature": 0.5, "top_p": 0.8, "max_tokens": 9, "seed": 7, "stop": ["END"]}
    # Cached: no second chat call, and the engine is loaded once.
    assert client.generate(["a", "b"], sampling) == out
    assert len(fake.calls["chat"]) == 1


def test_in_process_vllm_refuses_a_too_long_prompt_alone(monkeypatch, tmp_path):
    # vLLM raises for a batch holding one prompt over max_model_len: that prompt is refused and
    # recorded, named by its item, and the others are answered.
    fake = make_fake_vllm()
    fake.max_model_len = 6
    monkeypatch.setitem(sys.modules, "vllm", fake)
    client = LLMClient(model="/models/tiny", cache_dir=tmp_path)
    out = client.generate(["a b", "one two three four five", "c"], SamplingParams(n=2), labels=["x", "y", "z"])
    assert out == [["a b/0", "a b/1"], ["", ""], ["c/0", "c/1"]]
    (conversations, _), = fake.calls["chat"]
    assert [c[-1]["content"] for c in conversations] == ["a b", "c"]
    (failure,) = client.failures
    assert (failure.item, failure.prompt_tokens, failure.context_window) == ("y", 7, 6)
    assert failure.describe() == ("item y: prompt of 7 tokens is longer than the model's context window of 6 tokens; "
                                  "answered as an abstention")
    assert client.stats["failed"] == 1
    # Not cached: a model with a longer window is asked again.
    fake.max_model_len = 4096
    client = LLMClient(model="/models/tiny", cache_dir=tmp_path)
    assert client.generate(["one two three four five"], SamplingParams(n=1)) == [["one two three four five/0"]]
    # Every prompt too long: vLLM is not called at all.
    fake.max_model_len = 1
    client = LLMClient(model="/models/tiny", cache_dir=None)
    assert client.generate(["d"], SamplingParams(n=1)) == [[""]] and len(fake.calls["chat"]) == 2


def test_cache_is_shared_between_backends(monkeypatch, tmp_path):
    # The model vLLM loaded in process, served by `vllm serve` (which lists it with its root), is not asked again.
    monkeypatch.setitem(sys.modules, "vllm", make_fake_vllm())
    LLMClient(model="org/shared", cache_dir=tmp_path).generate(["q"], SamplingParams(seed=0))
    with OpenAIStubServer(model="org/shared", model_card={"root": "org/shared"}) as server:
        out = LLMClient(base_url=server.base_url, model="org/shared", cache_dir=tmp_path).generate(
            ["q"], SamplingParams(seed=0))
    assert out == [["q/0"]] and server.n_requests == 0
    # Served under that name from other weights, it is another model.
    with OpenAIStubServer(model="org/shared", model_card={"root": "/models/other"}) as server:
        out = LLMClient(base_url=server.base_url, model="org/shared", cache_dir=tmp_path).generate(
            ["q"], SamplingParams(seed=0))
    assert out == [["echo: q"]] and server.n_requests == 1


# -- the model's identity in the cache key -------------------------------------


@pytest.mark.parametrize("card_a, card_b", [
    ({"root": "/models/a.gguf"}, {"root": "/models/b.gguf"}),  # vLLM
    ({"meta": {"n_params": 134515008, "size": 98000000}}, {"meta": {"n_params": 134515008, "size": 99000000}}),  # llama.cpp
    ({"root": "base", "parent": None}, {"root": "base", "parent": "other-base"}),  # an adapter on another base
])
def test_two_servers_of_one_name_and_different_models_share_no_answer(tmp_path, card_a, card_b):
    sampling = SamplingParams(seed=0)
    with OpenAIStubServer(lambda req: "from A", model="m", model_card=card_a) as a, \
            OpenAIStubServer(lambda req: "from B", model="m", model_card=card_b) as b:
        assert LLMClient(base_url=a.base_url, model="m", cache_dir=tmp_path).generate(["q"], sampling) == [["from A"]]
        client_b = LLMClient(base_url=b.base_url, model="m", cache_dir=tmp_path)
        assert client_b.generate(["q"], sampling) == [["from B"]]
        assert (a.n_requests, b.n_requests, client_b.stats["cache_hits"]) == (1, 1, 0)
    # The same model served again (a restarted server) is answered from the cache.
    with OpenAIStubServer(lambda req: "from A again", model="m", model_card=card_a) as again:
        client = LLMClient(base_url=again.base_url, model="m", cache_dir=tmp_path)
        assert client.generate(["q"], sampling) == [["from A"]]
        assert again.n_requests == 0 and client.stats["cache_hits"] == 1
    entries = [json.loads(p.read_text()) for p in tmp_path.rglob("*.json")]
    assert sorted(e["texts"][0] for e in entries) == ["from A", "from B"]
    assert {e["texts"][0]: e["model_identity"] for e in entries}["from A"] == {k: v for k, v in card_a.items() if v is not None}


def test_the_model_files_sha256_tells_models_of_one_name_apart(monkeypatch, tmp_path):
    # llama-cpp-python lists only the alias: the GGUF's SHA-256, given by who serves it, is the identity.
    cache, sampling = tmp_path / "cache", SamplingParams(seed=0)
    with OpenAIStubServer(model="smollm2") as server:
        for digest in ("a" * 64, "B" * 64, "a" * 64):
            client = LLMClient(base_url=server.base_url, model="smollm2", model_sha256=digest, cache_dir=cache)
            client.generate(["q"], sampling)
        assert server.n_requests == 2 and client.stats["cache_hits"] == 1
        monkeypatch.setenv(llm.ENV_MODEL_SHA256, "b" * 64)
        client = LLMClient(base_url=server.base_url, model="smollm2", cache_dir=cache)
        assert client.model_identity() == {"sha256": "b" * 64}
        client.generate(["q"], sampling)
        assert server.n_requests == 2 and client.stats["cache_hits"] == 1
    with pytest.raises(LLMConfigError, match="64 hexadecimal digits, got 'abc'"):
        LLMClient(base_url="http://127.0.0.1:9/v1", model="m", model_sha256="abc")


def test_a_local_model_file_in_process_is_identified_by_its_content(monkeypatch, tmp_path):
    import hashlib

    fake = make_fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF weights one")
    client = LLMClient(model=str(gguf), cache_dir=tmp_path / "cache")
    assert client.model_identity() == {"root": str(gguf), "sha256": hashlib.sha256(b"GGUF weights one").hexdigest()}
    client.generate(["q"])
    LLMClient(model=str(gguf), cache_dir=tmp_path / "cache").generate(["q"])
    assert len(fake.calls["chat"]) == 1
    gguf.write_bytes(b"GGUF weights two")  # other weights at the same path
    LLMClient(model=str(gguf), cache_dir=tmp_path / "cache").generate(["q"])
    assert len(fake.calls["chat"]) == 2
    with pytest.raises(LLMConfigError, match="has SHA-256 .* not the configured " + "c" * 64):
        LLMClient(model=str(gguf), model_sha256="c" * 64, cache_dir=tmp_path / "cache").generate(["q"])
    # A folder's identity follows any of its files.
    folder = tmp_path / "hf_model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    first = LLMClient(model=str(folder), cache_dir=None).model_identity()
    (folder / "config.json").write_text('{"layers": 2}')
    assert LLMClient(model=str(folder), cache_dir=None).model_identity()["sha256"] != first["sha256"]
    assert LLMClient(model="org/name", vllm_kwargs={"revision": "abc123"}, cache_dir=None).model_identity() == {
        "root": "org/name", "revision": "abc123"}


def test_a_name_the_server_does_not_serve_is_one_error_naming_what_it_serves(tmp_path):
    # llama-cpp-python's server would answer any name with its one model: the client never asks it.
    with OpenAIStubServer(model=["served", "served-too"], model_card={"root": "/models/x"}) as server:
        for cache in (tmp_path, None):
            client = LLMClient(base_url=server.base_url, model="not-listed", cache_dir=cache)
            with pytest.raises(LLMConfigError) as info:
                client.generate(["q"])
            assert str(info.value) == (
                f"the server at {server.base_url} does not serve the model 'not-listed'; it serves 'served', "
                f"'served-too' (GET {server.base_url}/models). Set the model (--llm_model or $OPENPERT_LLM_MODEL) to "
                "one of them.")
        with pytest.raises(LLMConfigError, match="does not serve the model 'not-listed'"):
            LLMClient(base_url=server.base_url, model="not-listed", cache_dir=None).resolved_model()
        # Any name it lists will do.
        client = LLMClient(base_url=server.base_url, model="served-too", cache_dir=tmp_path)
        assert client.generate(["q"]) == [["echo: q"]] and client.model_identity() == {"root": "/models/x"}
    assert server.n_requests == 1


def test_a_server_without_a_model_list_is_used_as_configured_with_a_warning(tmp_path, caplog):
    with OpenAIStubServer(model="served", list_models=False) as server:
        client = LLMClient(base_url=server.base_url, model="any-name", cache_dir=tmp_path)
        with caplog.at_level("WARNING", logger="pertsci.llm"):
            assert client.generate(["q"]) == [["echo: q"]]
        assert client.model_identity() == {}
    assert "models answered HTTP 404: the model any-name cannot be checked" in caplog.text
    assert server.requests[0]["model"] == "any-name"


def test_auto_prefers_server_when_base_url_set(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", make_fake_vllm())
    client = LLMClient(base_url="http://127.0.0.1:9/v1", model="m", cache_dir=None)
    assert client.backend == "openai"


def test_concurrent_generate_calls_share_a_client(tmp_path):
    # Components may call one client from several threads.
    with stub() as server:
        client = fast_client(server, cache_dir=tmp_path)
        results = {}

        def work(k):
            results[k] = client.generate([f"t{k}-{i}" for i in range(5)])

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert all(results[k] == [[f"echo: t{k}-{i}"] for i in range(5)] for k in range(4))
    assert server.n_requests == 20


def test_stub_only_binds_loopback():
    with pytest.raises(ValueError):
        OpenAIStubServer(host="0.0.0.0")


def test_loopback_server_bypasses_proxy(monkeypatch):
    # A proxy meant for the outside world must not swallow requests to a local server.
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with stub() as server:
        assert fast_client(server, max_retries=0).generate(["x"]) == [["echo: x"]]


def test_stats_count_prompts_samples_and_the_servers_tokens(tmp_path):
    with stub(lambda req: "two words", fail_first=1) as server:
        client = fast_client(server, cache_dir=tmp_path, max_concurrency=1)
        client.generate(["one two three", "four five", "one two three"], SamplingParams(n=2))
        # Three prompts, two distinct: two answered requests (+1 failed and retried), the stub's word counts.
        assert client.stats == {"prompts": 3, "samples": 6, "generated": 2, "cache_hits": 0, "requests": 3,
                                "retries": 1, "prompt_tokens": 3 + 2, "completion_tokens": 2 * 2 * 2, "unmetered": 0,
                                "failed": 0, "context_window": 0}
        again = fast_client(server, cache_dir=tmp_path)
        again.generate(["four five"], SamplingParams(n=2))
        # A cached answer costs no request and no token.
        assert again.stats == {"prompts": 1, "samples": 2, "generated": 0, "cache_hits": 1, "requests": 0,
                               "retries": 0, "prompt_tokens": 0, "completion_tokens": 0, "unmetered": 0, "failed": 0,
                               "context_window": 0}


@pytest.mark.parametrize("usage", [None, {"prompt_tokens": None, "completion_tokens": 3}, {"prompt_tokens": -1,
                                                                                          "completion_tokens": 3}])
def test_a_response_without_usable_usage_is_unmetered_not_zero(monkeypatch, usage):
    with stub(lambda req: "x") as server:
        client = fast_client(server)
        real = client._send_with_retries

        def without_usage(url, payload):
            body = real(url, payload)
            if payload is None:  # GET /models
                return body
            if usage is None:
                body.pop("usage")
            else:
                body["usage"] = usage
            return body

        monkeypatch.setattr(client, "_send_with_retries", without_usage)
        client.generate(["a", "b"])
    assert (client.stats["unmetered"], client.stats["prompt_tokens"], client.stats["completion_tokens"]) == (2, 0, 0)


def test_vllm_backend_counts_token_ids(monkeypatch):
    fake = make_fake_vllm()
    chat = fake.LLM.chat

    def with_token_ids(self, conversations, sampling_params=None, use_tqdm=True):
        outputs = chat(self, conversations, sampling_params, use_tqdm)
        for output in outputs:
            output.prompt_token_ids = [1, 2, 3, 4]
            for completion in output.outputs:
                completion.token_ids = [5, 6]
        return outputs

    fake.LLM.chat = with_token_ids
    monkeypatch.setitem(sys.modules, "vllm", fake)
    client = LLMClient(model="/models/tiny", cache_dir=None)
    client.generate(["a", "b"], SamplingParams(n=3))
    assert (client.stats["requests"], client.stats["prompt_tokens"], client.stats["completion_tokens"]) == (1, 8, 12)


def test_prompts_sharing_a_prefix_are_sent_together_and_answered_in_order():
    # Two perturbations' questions interleaved, as a component builds them item by item.
    prompts = [f"Perturbation {p}. Context of {p}: {p * 200}. Gene {g}?" for g in "XYZ" for p in ("KRAS", "TP53")]
    with stub() as server:
        out = fast_client(server, max_concurrency=1).generate(prompts, SamplingParams(n=1))
    assert out == [[f"echo: {p}"] for p in prompts]
    sent = [r["messages"][-1]["content"] for r in server.requests]
    assert sent == sorted(prompts)
    # The three KRAS questions first, then the three TP53 ones: each group shares its long context.
    assert [s.split(".")[0] for s in sent] == ["Perturbation KRAS"] * 3 + ["Perturbation TP53"] * 3


def test_ordering_keeps_deduplicated_answers_in_place(tmp_path):
    prompts = ["b question", "a question", "b question", "c question", "a question"]
    with stub(lambda req: req["messages"][-1]["content"].upper()) as server:
        out = fast_client(server, cache_dir=tmp_path, max_concurrency=1).generate(prompts)
    assert out == [[p.upper()] for p in prompts]
    assert [r["messages"][-1]["content"] for r in server.requests] == ["a question", "b question", "c question"]


def test_dry_run_sends_nothing_and_logs_its_plan(monkeypatch, tmp_path, capsys):
    from pertsci.llm_plan import PLAN_MARK

    monkeypatch.setenv(llm.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.setenv("OPENPERT_LLM_DRY_RUN_ANSWER_CHARS", "40")
    client = LLMClient(backend="dry_run")
    sampling = SamplingParams(n=3, max_tokens=10)
    out = client.generate(["q1 " * 10, "q2 " * 10, "q1 " * 10], sampling)
    again = client.generate(["q2 " * 10, "q3"], sampling)
    assert [len(samples) for samples in out + again] == [3] * 5
    assert all(len(text) == 40 for samples in out + again for text in samples)
    first, second = [json.loads(line[len(PLAN_MARK):]) for line in capsys.readouterr().err.splitlines()
                     if line.startswith(PLAN_MARK)]
    # Repeats within and across calls count once, as the cache of a real run would send them once.
    assert (first["requests"], first["repeated"], first["samples"]) == (2, 1, 6)
    assert (second["requests"], second["repeated"], second["samples"]) == (1, 1, 3)
    # "user\nq1 q1 ... \n" is 36 characters: 9 tokens by the characters / 4 approximation.
    assert first["prompt_tokens"] == 18 and first["max_completion_tokens"] == 60
    assert not (tmp_path / "cache").exists()


def test_dry_run_keeps_prompts_built_only_from_answers_apart(capsys):
    # A question naming no gene, only its summaries (PerturbQA's No-CoT prompt), must not collapse.
    from pertsci.llm_plan import PLAN_MARK

    client = LLMClient(backend="dry_run", cache_dir=None)
    summaries = client.generate(["Summarise KRAS.", "Summarise TP53."], SamplingParams(n=1))
    client.generate([f"Given: {s[0]} Is the gene essential?" for s in summaries], SamplingParams(n=3))
    plans = [json.loads(line[len(PLAN_MARK):]) for line in capsys.readouterr().err.splitlines()
             if line.startswith(PLAN_MARK)]
    assert [(p["requests"], p["repeated"], p["samples"]) for p in plans] == [(2, 0, 2), (2, 0, 6)]


def test_in_process_vllm_generates(monkeypatch):
    import os

    pytest.importorskip("vllm", reason="vLLM is not installed here: it needs CUDA and a GPU (pip install -e '.[llm]' on one)")
    model = os.environ.get("OPENPERT_TEST_VLLM_MODEL")
    if not model:
        pytest.skip("set OPENPERT_TEST_VLLM_MODEL to a small local model to generate with vLLM in process")
    client = LLMClient(model=model, backend="vllm", cache_dir=None)
    out = client.generate(["Answer yes.", "Answer no."], SamplingParams(n=2, max_tokens=8, temperature=0, seed=0))
    assert [len(samples) for samples in out] == [2, 2]
    assert all(isinstance(text, str) and text for samples in out for text in samples)
    # A prompt over the window is refused alone, as the fake vLLM of the tests above assumes vLLM counts it.
    short = LLMClient(model=model, backend="vllm", cache_dir=None, vllm_kwargs={"max_model_len": 64})
    out = short.generate(["Answer yes.", "word " * 200], SamplingParams(n=1, max_tokens=4, temperature=0, seed=0),
                         labels=["fits", "too_long"])
    assert out[0][0] and out[1] == [""]
    assert [(f.item, f.context_window) for f in short.failures] == [("too_long", 64)]


# -- servers as they are: n ignored, a context window, a crash mid-run, a cap on tokens ----------------------------


def test_a_server_that_ignores_n_is_asked_for_each_missing_sample():
    # llama-cpp-python's server answers one choice whatever n asks.
    def responder(req):
        return f"{req['messages'][-1]['content']} seed={req.get('seed')}"

    with stub(responder, ignore_n=True) as server:
        client = fast_client(server, max_concurrency=1)
        out = client.generate(["a", "b"], SamplingParams(n=3, seed=10))
        assert out == [[f"{p} seed={s}" for s in (10, 11, 12)] for p in ("a", "b")]
        assert [(r["n"], r["seed"]) for r in server.requests] == [(3, 10), (1, 11), (1, 12)] * 2
        assert (client.stats["requests"], client.stats["samples"], client.stats["generated"]) == (6, 6, 2)
        # Without a seed the further requests carry none either.
        assert fast_client(server).generate(["c"], SamplingParams(n=2)) == [["c seed=None"] * 2]
        assert ["seed" in r for r in server.requests[6:]] == [False, False]


def test_more_choices_than_n_is_an_error():
    with stub(lambda req: ["x", "y"]) as server:
        with pytest.raises(llm.LLMError, match="returned 2 choices for n=1"):
            fast_client(server).generate(["a"])


@pytest.mark.parametrize("style, said", [
    ("llama.cpp", "prompt of 12 tokens is longer than the model's context window of 10 tokens"),
    ("vllm", "prompt of 12 tokens is longer than the model's context window of 10 tokens"),
    ("vllm_total", "prompt of 12 tokens is longer than the model's context window of 10 tokens"),
])
def test_a_prompt_longer_than_the_context_window_is_answered_empty_and_recorded(tmp_path, style, said):
    long_prompt = " ".join(["word"] * 12)
    with stub(context_window=10, context_error=style) as server:
        client = fast_client(server, cache_dir=tmp_path, max_concurrency=1)
        sampling = SamplingParams(n=2, max_tokens=4)
        out = client.generate(["short one", long_prompt, "short two", long_prompt], sampling,
                              labels=["i1", "i2", "i3", "i4"])
        assert out == [["echo: short one"] * 2, ["", ""], ["echo: short two"] * 2, ["", ""]]
        # One request for the long prompt (asked once, shared), named for both items; no job failure.
        assert [f.describe() for f in client.failures] == [f"item i2: {said}; answered as an abstention",
                                                           f"item i4: {said}; answered as an abstention"]
        assert (client.failures[0].prompt_tokens, client.failures[0].context_window) == (12, 10)
        assert client.stats | {"prompt_tokens": 0, "completion_tokens": 0} == {
            "prompts": 4, "samples": 8, "generated": 2, "cache_hits": 0, "requests": 3, "retries": 0, "prompt_tokens": 0,
            "completion_tokens": 0, "unmetered": 0, "failed": 2, "context_window": 10}
        # Refusals are never cached: a rerun asks again.
        again = fast_client(server, cache_dir=tmp_path)
        assert again.generate([long_prompt, "short one"], sampling) == [["", ""], ["echo: short one"] * 2]
        assert again.stats["cache_hits"] == 1 and again.stats["failed"] == 1 and server.n_requests == 4
        assert again.failures[0].item is None and again.failures[0].describe().startswith("a prompt without an item")
    assert len(list(tmp_path.rglob("*.json"))) == 2


def test_a_prompt_leaving_no_room_for_the_completion_is_recorded_as_such():
    # vLLM refuses a prompt shorter than the window when max_tokens does not fit beside it.
    with stub(context_window=10, context_error="vllm") as server:
        client = fast_client(server)
        assert client.generate(["one two three four five six"], SamplingParams(max_tokens=8), labels=["x"]) == [[""]]
    (failure,) = client.failures
    assert (failure.prompt_tokens, failure.context_window, failure.completion_tokens) == (6, 10, 8)
    assert failure.describe() == ("item x: prompt of 6 tokens leaves no room for the 8 completion tokens asked in the "
                                  "model's context window of 10 tokens; answered as an abstention")


@pytest.mark.parametrize("message, code, expected", [
    ("This model's maximum context length is 8192 tokens. However, you requested 9290 tokens (9034 in the messages, "
     "256 in the completion). Please reduce the length of the messages or completion.", "context_length_exceeded",
     (9034, 8192, 256)),
    ("This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. Please reduce "
     "the length of the input messages.", "400", (5000, 4096, None)),
    ("'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 4096 tokens "
     "and your request has 3500 input tokens (1000 > 4096 - 3500).", None, (3500, 4096, 1000)),
    ("This model's maximum context length is 131072 tokens. However, you requested 4096 output tokens and your prompt "
     "contains at least 126977 input tokens. Please reduce the length of the input prompt.", None, (126977, 131072, 4096)),
    ("prompt too long", "context_length_exceeded", (None, None, None)),
])
def test_context_refusals_of_llama_cpp_and_vllm_are_read(message, code, expected):
    refusal = llm._context_refusal(message, code)
    assert (refusal.prompt_tokens, refusal.context_window, refusal.completion_tokens) == expected
    assert refusal.server_message == message
    assert llm._context_refusal("model 'x' does not exist", None) is None


def test_other_client_errors_still_fail_the_call():
    with stub(status=400, status_message="'messages' is a required property") as server:
        with pytest.raises(LLMRequestError, match="HTTP 400: 'messages' is a required property"):
            fast_client(server).generate(["a"], labels=["i1"])


def test_labels_must_match_the_prompts():
    with stub() as server:
        with pytest.raises(ValueError, match="2 labels for 1 prompts"):
            fast_client(server).generate(["a"], labels=["x", "y"])


def test_answers_are_cached_as_they_arrive_and_a_rerun_asks_only_the_rest(tmp_path):
    prompts = [f"question {i}" for i in range(12)]
    with stub(die_after=5) as dying:
        port = dying.bound_port
        client = fast_client(dying, cache_dir=tmp_path, max_concurrency=4, max_retries=2)
        with pytest.raises(LLMRequestError) as info:
            client.generate(prompts)
    message = str(info.value)
    assert "failed after 3 attempts" in message
    assert (f"5 of the 12 answers of this call are in the generation cache ({tmp_path}); a rerun (openpert benchmark "
            "--resume) asks only the other 7") in message
    kept = {json.loads(p.read_text())["messages"][-1]["content"] for p in tmp_path.rglob("*.json")}
    assert dying.answered == 5 and len(kept) == 5
    # The same server restarted on its port: only the prompts not answered are asked.
    with stub(port=port) as restarted:
        again = fast_client(restarted, cache_dir=tmp_path, max_concurrency=4)
        assert again.generate(prompts) == [[f"echo: {p}"] for p in prompts]
    assert restarted.n_requests == 7 and again.stats["cache_hits"] == 5 and again.stats["generated"] == 7
    assert sorted(r["messages"][-1]["content"] for r in restarted.requests) == sorted(set(prompts) - kept)


def test_without_a_cache_the_error_says_a_rerun_asks_all():
    with stub(die_after=1) as dying:
        with pytest.raises(LLMRequestError, match="the generation cache is off, so a rerun asks all 3 prompts"):
            fast_client(dying, max_retries=0, max_concurrency=1).generate(["a", "b", "c"])


def test_the_cap_on_generated_tokens_is_what_is_sent_and_keyed(monkeypatch, tmp_path):
    with stub() as server:
        capped = fast_client(server, cache_dir=tmp_path, max_tokens_cap=16)
        capped.generate(["a"], SamplingParams(max_tokens=1024, seed=0))
        capped.generate(["b"], SamplingParams(max_tokens=8, seed=0))
        assert [r["max_tokens"] for r in server.requests] == [16, 8]
        # Asked for 16 without a cap, "a" is the same request: answered from the cache.
        plain = fast_client(server, cache_dir=tmp_path)
        plain.generate(["a"], SamplingParams(max_tokens=16, seed=0))
        assert plain.stats["cache_hits"] == 1 and server.n_requests == 2
        plain.generate(["a"], SamplingParams(max_tokens=1024, seed=0))
        assert server.n_requests == 3 and server.requests[-1]["max_tokens"] == 1024
        monkeypatch.setenv(llm.ENV_MAX_TOKENS, "32")
        assert fast_client(server).max_tokens_cap == 32
        assert client_from_arguments(llm_base_url=server.base_url, llm_model="test-model", llm_max_tokens=4,
                                     llm_cache_dir="none").max_tokens_cap == 4
    for bad in ("0", "many", "-3"):
        monkeypatch.setenv(llm.ENV_MAX_TOKENS, bad)
        with pytest.raises(LLMConfigError, match="OPENPERT_LLM_MAX_TOKENS.* at least 1, got"):
            LLMClient(base_url="http://127.0.0.1:9/v1", model="m", cache_dir=None)


def test_a_dry_run_plans_with_the_capped_tokens(capsys):
    from pertsci.llm_plan import PLAN_MARK

    LLMClient(backend="dry_run", cache_dir=None, max_tokens_cap=5).generate(["q"], SamplingParams(n=2, max_tokens=100))
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith(PLAN_MARK)]
    assert json.loads(line[len(PLAN_MARK):])["max_completion_tokens"] == 10


def test_refusals_are_listed_in_the_order_of_the_prompts_whatever_order_they_arrive_in():
    prompts = [" ".join([f"w{i}"] * (5 + i % 7)) for i in range(30)]
    with stub(context_window=8, delay=0.005) as server:
        client = fast_client(server, max_concurrency=8)
        client.generate(prompts, labels=[f"q{i}" for i in range(30)])
    expected = [f"q{i}" for i in range(30) if 5 + i % 7 >= 8]
    assert [f.item for f in client.failures] == expected and client.stats["failed"] == len(expected) == 16
