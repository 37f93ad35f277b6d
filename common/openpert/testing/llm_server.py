"""A local OpenAI-format server for tests of code that calls a language model.

:class:`OpenAIStubServer` answers ``POST /v1/chat/completions`` and
``GET /v1/models`` the way ``vllm serve`` or the OpenAI API do, with texts
chosen by a Python function. Task and method component tests point
:class:`pertsci.llm.LLMClient` (or ``OPENPERT_LLM_BASE_URL``) at it, so they
exercise the real HTTP path without a model or a network.

It can also behave as real servers do where they differ from the OpenAI API: list several served
names (``model``), have no ``GET /v1/models`` (``list_models=False``), answer one choice whatever
``n`` asks (``ignore_n``, as llama-cpp-python's server does), refuse a prompt longer than a context
window with the HTTP 400 of llama-cpp-python or vLLM (``context_window``, ``context_error``), and
stop for good after a number of answers (``die_after``), as a server that crashes mid-run.

It only ever listens on 127.0.0.1.

Examples
--------
>>> from pertsci.llm import LLMClient, SamplingParams
>>> with OpenAIStubServer(lambda req: "hello") as server:  # doctest: +SKIP
...     client = LLMClient(base_url=server.base_url, model="m", cache_dir=None)
...     client.generate(["hi"], SamplingParams(n=2))
[['hello', 'hello']]
"""

from __future__ import annotations

import http.server
import itertools
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["OpenAIStubServer", "StubHTTPError", "echo_responder", "CONTEXT_ERRORS"]

_LOOPBACK = "127.0.0.1"
#: How a server words its refusal of a request longer than its context window (``context_error``):
#: ``llama.cpp`` (llama-cpp-python's server: a prompt of at least the window; code
#: ``context_length_exceeded``), ``vllm`` (a prompt of at least the window: "your request has N input
#: tokens"; else a prompt and ``max_tokens`` that together exceed it: "'max_tokens' ... is too
#: large"), ``vllm_total`` (vLLM's older wording of both: "you requested T tokens (P in the messages,
#: C in the completion)").
CONTEXT_ERRORS = ("llama.cpp", "vllm", "vllm_total")

#: A responder gets the decoded request body and returns the text of each
#: choice: one string (repeated ``n`` times) or a list of strings (used as is).
Responder = Callable[[dict[str, Any]], "str | list[str]"]


class StubHTTPError(Exception):
    """Raised by a responder to make the server answer with an HTTP error.

    Parameters
    ----------
    status : int
        HTTP status to send.
    message : str
        Sent as ``{"error": {"message": ...}}``, like the OpenAI API.
    headers : dict, optional
        Extra response headers (e.g. ``Retry-After``).
    """

    def __init__(self, status: int, message: str = "stub error", headers: dict[str, str] | None = None):
        super().__init__(f"HTTP {status}: {message}")
        self.status = int(status)
        self.message = message
        self.headers = dict(headers or {})


def echo_responder(request: dict[str, Any]) -> str:
    """Default responder: the content of the last message, prefixed by ``echo: ``."""
    messages = request.get("messages") or [{}]
    return f"echo: {messages[-1].get('content', '')}"


class OpenAIStubServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1, run in a thread.

    Parameters
    ----------
    responder : callable, optional
        ``responder(request_json) -> str | list[str]`` gives the choices' texts.
        A single string is repeated ``n`` times. It may raise
        :class:`StubHTTPError` to send an HTTP error; any other exception
        becomes an HTTP 500 naming it. Default :func:`echo_responder`.
    host : str
        Must be ``"127.0.0.1"`` (or ``"localhost"``): the stub never listens
        beyond the machine.
    port : int
        0 picks a free port; see :attr:`base_url`.
    fail_first : int
        The first ``fail_first`` chat requests get HTTP 500, for retry tests.
    status : int, optional
        When set, every chat request gets this HTTP status (e.g. 400 or 429)
        with ``status_message``; can be changed while running.
    status_message : str
        Error message sent with ``status`` and ``fail_first`` failures.
    delay : float
        Seconds to wait before answering each chat request, so tests can see
        requests overlap.
    model : str or sequence of str
        Id listed by ``GET /v1/models``, or several (vLLM lists every
        ``--served-model-name``). Whatever name a request gives is answered,
        as llama-cpp-python's server answers any name with its one model.
    list_models : bool
        ``False``: ``GET /v1/models`` answers HTTP 404, as a server without
        the listing.
    ignore_n : bool
        Answer one choice whatever ``n`` the request asks for, as
        llama-cpp-python's server does.
    context_window : int, optional
        The model's context window in tokens (the stub counts whitespace
        words). A longer request gets HTTP 400 worded as ``context_error``.
    context_error : str
        One of :data:`CONTEXT_ERRORS`.
    die_after : int, optional
        After this many answered chat requests the server stops: requests in
        flight or arriving later get their connection closed without an
        answer, and the port refuses connections, as a crashed server's would.
    idle_timeout : float, optional
        Seconds a kept-alive connection may stay idle before the server closes
        it (as llama.cpp and vLLM do); default: until the client closes it.
    model_card : dict, optional
        More fields of that listing's entry, as a real server adds them:
        vLLM's ``root`` (the path or hub id it loaded), llama.cpp's ``meta``
        (parameter count, file size, ...). Two stubs with the same ``model``
        and different cards stand for two models served under one name.

    Attributes
    ----------
    requests : list of dict
        Body of every chat request received, failed ones included, in arrival order.
    headers : list of dict
        Headers of the same requests.
    max_in_flight : int
        Largest number of chat requests being answered at the same time.
    connections : int
        Connections accepted so far. The server speaks HTTP/1.1 and keeps a
        connection open for the next request unless the client asks to close.
    """

    def __init__(self, responder: Responder | None = None, host: str = _LOOPBACK, port: int = 0, *,
                 fail_first: int = 0, status: int | None = None, status_message: str = "stub error",
                 delay: float = 0.0, model: str | Sequence[str] = "stub-model",
                 model_card: dict[str, Any] | None = None, idle_timeout: float | None = None,
                 list_models: bool = True, ignore_n: bool = False, context_window: int | None = None,
                 context_error: str = "llama.cpp", die_after: int | None = None):
        if host not in (_LOOPBACK, "localhost"):
            raise ValueError(f"OpenAIStubServer only binds {_LOOPBACK}, not {host!r}")
        if context_error not in CONTEXT_ERRORS:
            raise ValueError(f"context_error must be one of {CONTEXT_ERRORS}, got {context_error!r}")
        self.responder = responder or echo_responder
        self.port = int(port)
        self.fail_first = int(fail_first)
        self.status = status
        self.status_message = status_message
        self.delay = float(delay)
        self.models = [model] if isinstance(model, str) else [str(m) for m in model]
        if not self.models:
            raise ValueError("the stub serves at least one model name")
        self.model = self.models[0]
        self.model_card = dict(model_card or {})
        self.idle_timeout = idle_timeout
        self.list_models = bool(list_models)
        self.ignore_n = bool(ignore_n)
        self.context_window = None if context_window is None else int(context_window)
        self.context_error = context_error
        self.die_after = None if die_after is None else int(die_after)
        #: Chat requests answered with their choices (HTTP 200).
        self.answered = 0
        # Answers given whose bytes are still being written: the server dies only once none is.
        self._writing = 0
        self._counted = threading.local()  # whether this handler thread's answer was counted in ``answered``
        self._stop_lock = threading.Lock()
        self.connections = 0
        self._open: set[socket.socket] = set()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._bound_port: int | None = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for ``base_url``.

        Still answers after :meth:`stop` (the port it had), so a test can
        check what a client does when nothing listens there any more.
        """
        if self._bound_port is None:
            raise RuntimeError("the stub server was never started; use it as a context manager or call start()")
        return f"http://{_LOOPBACK}:{self._bound_port}/v1"

    @property
    def bound_port(self) -> int:
        """The port it listens (or listened) on: a server restarted there is ``OpenAIStubServer(port=...)``."""
        if self._bound_port is None:
            raise RuntimeError("the stub server was never started; use it as a context manager or call start()")
        return self._bound_port

    def start(self) -> OpenAIStubServer:
        """Bind and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._httpd = _Server((_LOOPBACK, self.port), self._handler_class())
        # Daemon threads so a test that forgets to stop the server does not
        # hang the interpreter at exit.
        self._httpd.daemon_threads = True
        self._bound_port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="openpert-llm-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket and every open connection, as a stopped server would."""
        # A server dying on its own (die_after) stops from a thread of its own while a test may stop it too.
        with self._stop_lock:
            if self._httpd is None:
                return
            self._httpd.shutdown()
            self._httpd.server_close()
            with self._lock:
                open_connections = list(self._open)
            for connection in open_connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # the client closed it meanwhile: nothing left to close
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._httpd = None
            self._thread = None

    def __enter__(self) -> OpenAIStubServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def n_requests(self) -> int:
        """Number of chat requests received so far."""
        with self._lock:
            return len(self.requests)

    # -- request handling --------------------------------------------------

    @property
    def dead(self) -> bool:
        """Whether it has given its ``die_after`` answers: it answers nothing more."""
        with self._lock:
            return self.die_after is not None and self.answered >= self.die_after

    def _answer_chat(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        """Status, JSON body and extra headers for one chat request; ``None``: no answer (the server is dead)."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            number = len(self.requests)
        if self.delay:
            time.sleep(self.delay)
        if self.dead:
            return None
        if number <= self.fail_first:
            return 500, _error_body(f"{self.status_message} (planned failure {number}/{self.fail_first})"), {}
        if self.status is not None:
            return int(self.status), _error_body(self.status_message), {}
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        too_long = self._context_refusal(prompt_words, int(body.get("max_tokens") or 16))
        if too_long is not None:
            return 400, too_long, {}
        try:
            texts = self.responder(body)
        except StubHTTPError as exc:
            return exc.status, _error_body(exc.message), exc.headers
        except Exception as exc:  # noqa: BLE001 - a broken responder must answer, not hang the client
            return 500, _error_body(f"responder raised {type(exc).__name__}: {exc}"), {}
        n = 1 if self.ignore_n else int(body.get("n") or 1)
        if isinstance(texts, str):
            texts = [texts] * n
        texts = [str(t) for t in texts][: 1 if self.ignore_n else None]
        with self._lock:
            # Decided with the count, so that exactly die_after requests are answered however many overlap.
            if self.die_after is not None and self.answered >= self.die_after:
                return None
            self.answered += 1
            self._writing += 1
        self._counted.value = True
        completion_words = sum(len(t.split()) for t in texts)
        response = {
            "id": f"chatcmpl-stub-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
                for i, text in enumerate(texts)
            ],
            # Whitespace words stand in for tokens: close enough for code
            # that only reads or sums these numbers.
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": completion_words,
                "total_tokens": prompt_words + completion_words,
            },
        }
        return 200, response, {}

    def _context_refusal(self, prompt_tokens: int, max_tokens: int) -> dict[str, Any] | None:
        """The 400 body of a request that does not fit :attr:`context_window`, worded as :attr:`context_error`."""
        window = self.context_window
        if window is None:
            return None
        total = prompt_tokens + max_tokens
        if self.context_error == "llama.cpp":
            # llama-cpp-python refuses a prompt of the window or more, and shortens max_tokens otherwise.
            if prompt_tokens < window:
                return None
            message = (f"This model's maximum context length is {window} tokens. However, you requested {total} tokens "
                       f"({prompt_tokens} in the messages, {max_tokens} in the completion). Please reduce the length "
                       "of the messages or completion.")
            return {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                              "code": "context_length_exceeded"}}
        if total <= window:
            return None
        if self.context_error == "vllm_total":
            message = (f"This model's maximum context length is {window} tokens. However, you requested {total} tokens "
                       f"({prompt_tokens} in the messages, {max_tokens} in the completion). Please reduce the length "
                       "of the messages or completion.")
        elif prompt_tokens >= window:
            message = (f"This model's maximum context length is {window} tokens. However, your request has "
                       f"{prompt_tokens} input tokens. Please reduce the length of the input messages.")
        else:
            message = (f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
                       f"context length is {window} tokens and your request has {prompt_tokens} input tokens "
                       f"({max_tokens} > {window} - {prompt_tokens}).")
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # Keep-alive, as real servers: every answer has a Content-Length.
            protocol_version = "HTTP/1.1"
            # Headers and body leave in two writes: without TCP_NODELAY (which real servers set),
            # Nagle's algorithm holds the body back for the client's delayed ACK, 40 ms an answer.
            disable_nagle_algorithm = True
            # A connection idle this long is closed (StreamRequestHandler's socket timeout).
            timeout = server.idle_timeout

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1
                    server._open.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._open.discard(self.connection)
                super().finish()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
                # Test output stays readable; requests are recorded in server.requests.
                return

            def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - name required by BaseHTTPRequestHandler
                if self.path.rstrip("/") == "/v1/models" and server.list_models:
                    self._send_json(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": name, "object": "model", "created": 0, "owned_by": "openpert",
                                      **server.model_card} for name in server.models],
                        },
                    )
                else:
                    self._send_json(404, _error_body(f"no route GET {self.path}"))

            def do_POST(self) -> None:  # noqa: N802 - name required by BaseHTTPRequestHandler
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if len(raw) < length:
                    # The connection closed mid-request (the server was stopped): nobody is left to answer.
                    self.close_connection = True
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send_json(404, _error_body(f"no route POST {self.path}"))
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError as exc:
                    self._send_json(400, _error_body(f"request body is not JSON: {exc}"))
                    return
                if not isinstance(body, dict):
                    self._send_json(400, _error_body("request body must be a JSON object"))
                    return
                server._counted.value = False
                with server._lock:
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    answer = server._answer_chat(body, dict(self.headers.items()))
                finally:
                    with server._lock:
                        server._in_flight -= 1
                if answer is None:
                    # Dead: the connection closes without an answer, as a crashed server's does.
                    self.close_connection = True
                    return
                try:
                    self._send_json(*answer)
                finally:
                    if server._counted.value:
                        with server._lock:
                            server._writing -= 1
                            last_written = server._writing == 0
                        if last_written and server.dead:
                            # Every answer given is written: the server goes, and takes every connection with it.
                            threading.Thread(target=server.stop, name="openpert-llm-stub-death", daemon=True).start()

        return Handler


class _Server(http.server.ThreadingHTTPServer):
    # The default listen backlog of 5 drops connections when a client opens
    # many at once, and the kernel retries them only after a second: tests
    # of concurrency would be slow and timing-dependent.
    request_queue_size = 128

    def handle_error(self, request, client_address) -> None:
        # A client that closes or resets its connection while the server reads or
        # writes is what clients do (and what a dying server provokes): not a fault.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def _error_body(message: str) -> dict[str, Any]:
    """An error in the OpenAI response shape."""
    return {"error": {"message": message, "type": "stub_error", "param": None, "code": None}}
