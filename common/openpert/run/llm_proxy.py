"""Forward a sandboxed job's language-model requests to its configured server, and count them.

A component that talks to a language model runs with no network of its own (``bwrap
--unshare-net``: only its private loopback exists). For the job's duration the harness serves, on
a Unix socket inside the job's work folder, a small HTTP proxy (:class:`LLMProxy`) that sends each
request on to the one configured endpoint (``OPENPERT_LLM_BASE_URL`` or ``--llm_base_url``). The
socket is bound read-only into the sandbox, and the job's launcher relays a loopback port of the
job's own network namespace to it (:data:`RELAY_PORT`, :data:`ENV_RELAY`); the job's base URL is
rewritten to that port (:meth:`LLMProxy.job_base_url`). So the job reaches its model and nothing
else: no other address, no name lookup, no other job's sockets.

The server's API key stays with the harness: given to the proxy, which sends it with every request
(``Authorization: Bearer``), it is not in the job's environment nor in its ``par``, so a job cannot
copy it into an output that gets published.

The proxy only forwards paths under the base URL's own path (``/v1/...`` for
``http://host:8000/v1``) and never follows a redirect. HTTPS endpoints are spoken to with TLS by the
proxy (the job speaks plain HTTP to its relay): the proxy connects to the configured host name, so
the certificate check and SNI are the host's, and it sets ``Host`` to that name.

Since every request passes through it, the proxy counts them: ``requests`` (POST requests, each
retry included, as :attr:`pertsci.llm.LLMClient.stats` counts them), ``prompt_tokens`` and
``completion_tokens`` from the server's ``usage`` object (OpenAI format; a JSON response, or the
events of a streamed one), and ``unmetered`` (successful POST responses without ``usage``). These
counts are the harness's, not the component's: the component's own account in its output
(``uns["llm_usage"]``) can be checked against them.

While the job runs, :attr:`LLMProxy.progress` tells how far it is (:class:`LLMProgress`): the
answers received (successful POST responses, counted by the proxy), the requests the job says it
will send (the largest ``X-Openpert-Planned`` header of its requests, :data:`PLANNED_HEADER`,
which :class:`pertsci.llm.LLMClient` sends; a claim of the component, shown in the progress output
and never used for a score or a record) and the completion tokens per second since its first
request. The header is not forwarded: the server sees the request as the job's client would send
it to any server.
"""

from __future__ import annotations

import gzip
import http.client
import http.server
import json
import logging
import os
import socketserver
import ssl
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The loopback port of the job's own network namespace that its launcher relays to the proxy.
#: Fixed: the namespace is the job's alone, so no other program holds it.
RELAY_PORT = 8765
#: The variable that tells the launcher where to relay: ``<socket path in the sandbox> <port>``.
ENV_RELAY = "OPENPERT_LLM_RELAY"
#: The counts of :attr:`LLMProxy.counts` (names as in :data:`pertsci.llm.STATS_KEYS`).
COUNT_KEYS = ("requests", "prompt_tokens", "completion_tokens", "unmetered")
#: Seconds the proxy waits for the server (a long generation included); the job's time limit ends it sooner.
UPSTREAM_TIMEOUT_S = 3600.0
#: Headers that belong to one connection, not to the request or response (RFC 9110, 7.6.1).
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "proxy-connection"})
#: Largest request body forwarded (bytes): prompts are far smaller.
MAX_REQUEST_BYTES = 64 * 2**20
#: Longest path ``bind`` takes for a Unix socket (``sun_path`` holds 108 bytes, the final NUL included).
MAX_SOCKET_PATH = 107
#: The request header in which a job's client says how many generation requests it has planned so
#: far (``pertsci.llm.PLANNED_HEADER``, the same name: the harness does not import the science package).
PLANNED_HEADER = "X-Openpert-Planned"
#: Largest planned count believed: a larger or malformed header is ignored (it only feeds the display).
MAX_PLANNED = 10**9


@dataclass(frozen=True)
class LLMProgress:
    """How far a job's language-model work is, as its proxy saw it so far.

    Attributes
    ----------
    answered
        Successful (2xx) POST responses received from the server.
    planned
        The most generation requests the job's client said it had planned (``0``: it said nothing).
    completion_tokens
        Completion tokens the server reported (its ``usage``).
    seconds
        Seconds since the job's first POST request; ``None`` before it.
    """

    answered: int
    planned: int
    completion_tokens: int
    seconds: float | None

    @property
    def tokens_per_second(self) -> float | None:
        """Completion tokens per second since the first request (``None`` before any token was counted)."""
        if not self.seconds or not self.completion_tokens:
            return None
        return self.completion_tokens / self.seconds


def planned_claim(value: str | None) -> int | None:
    """The planned request count a :data:`PLANNED_HEADER` value states, or ``None`` when it states none.

    Only plain decimal digits up to :data:`MAX_PLANNED` are read: the value comes from the job.
    """
    if value is None:
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(MAX_PLANNED)):
        return None
    number = int(value)
    return number if number <= MAX_PLANNED else None


class LLMProxyError(ValueError):
    """The endpoint cannot be proxied (not an ``http``/``https`` URL, no host)."""


def usage_of(body: bytes, content_type: str, content_encoding: str = "") -> dict[str, int] | None:
    """The ``usage`` counts (``prompt_tokens``, ``completion_tokens``) of one response body, or ``None``.

    Parameters
    ----------
    body
        The response body as the server sent it.
    content_type
        Its ``Content-Type``: ``text/event-stream`` is read as server-sent events (a streamed
        completion, whose ``usage`` comes in one event, usually the last); anything else as JSON.
    content_encoding
        Its ``Content-Encoding`` (``gzip`` and ``deflate`` are decoded to read it).

    Returns
    -------
    dict or None
        The summed counts of every ``usage`` object found (one per response, or per event), or
        ``None`` when the body has none.
    """
    encoding = content_encoding.strip().lower()
    try:
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
    except (OSError, zlib.error, EOFError):
        return None
    if "text/event-stream" in content_type.lower():
        # Each event line is "data: {json}" (or "data: [DONE]"); comments and other fields are skipped.
        documents = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    else:
        documents = [body]
    found: dict[str, int] | None = None
    for document in documents:
        if b'"usage"' not in document:
            continue  # most events carry none: skip decoding them
        try:
            data = json.loads(document)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict):
            continue
        found = found or {"prompt_tokens": 0, "completion_tokens": 0}
        for key in found:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                found[key] += value
    return found


def bind_unix_socket(server: socketserver.UnixStreamServer, path: Path) -> None:
    """Bind ``server`` to ``path``, reaching a path longer than ``sun_path`` through its folder's descriptor.

    A job's work folder can lie deep in a results folder, beyond the 107 bytes a socket's path may
    have; ``/proc/self/fd/<n>/<name>`` names the same place in a few bytes.
    """
    if len(os.fsencode(str(path))) <= MAX_SOCKET_PATH:
        server.socket.bind(str(path))
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        server.socket.bind(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128  # a job's client opens several connections at once

    def __init__(self, path: Path, handler: type[http.server.BaseHTTPRequestHandler]):
        super().__init__(str(path), handler, bind_and_activate=False)
        self.socket_path = path
        try:
            bind_unix_socket(self, path)
            self.server_activate()
        except OSError:
            self.server_close()
            raise


class LLMProxy:
    """An HTTP proxy on a Unix socket that forwards to one OpenAI-compatible endpoint and counts usage.

    Parameters
    ----------
    base_url
        The endpoint the job was configured with (``http(s)://host[:port]/path``).
    socket_path
        Where to create the Unix socket (its folder must exist; the file must not).
    timeout
        Seconds to wait for the server.
    api_key
        The server's API key, sent as ``Authorization: Bearer <key>`` in place of any the job sends.

    Raises
    ------
    LLMProxyError
        When ``base_url`` is not an ``http`` or ``https`` URL with a host.

    Examples
    --------
    >>> with LLMProxy("http://127.0.0.1:8000/v1", Path("/tmp/x/llm.sock")) as proxy:  # doctest: +SKIP
    ...     run_the_job(base_url=proxy.job_base_url())
    ...     proxy.counts
    {'requests': 3, 'prompt_tokens': 120, 'completion_tokens': 30, 'unmetered': 0}
    """

    def __init__(self, base_url: str, socket_path: str | Path, *, timeout: float = UPSTREAM_TIMEOUT_S,
                 api_key: str | None = None):
        parts = urllib.parse.urlsplit(str(base_url).strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LLMProxyError(f"the language-model endpoint {base_url!r} is not an http:// or https:// URL with a host")
        self.base_url = str(base_url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        try:
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as err:
            raise LLMProxyError(f"the language-model endpoint {base_url!r} has an invalid port: {err}") from None
        self.path = parts.path.rstrip("/")
        # The Host header the server expects: the configured name (and port, when not the default).
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.socket_path = Path(socket_path)
        self.timeout = float(timeout)
        self._api_key = api_key or None
        self._counts = dict.fromkeys(COUNT_KEYS, 0)
        # For the progress output only (LLMProgress): not part of the counts a record keeps.
        self._answered = 0
        self._planned = 0
        self._first_request: float | None = None
        self._bad_planned_seen = False
        self._lock = threading.Lock()
        self._server: _UnixHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._tls = ssl.create_default_context() if self.scheme == "https" else None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> LLMProxy:
        """Create the socket and serve it in a thread."""
        if self._server is None:
            self._server = _UnixHTTPServer(self.socket_path, self._handler_class())
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                            name="openpert-llm-proxy", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and remove the socket (requests still being answered finish in their threads)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> LLMProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what the job is told, and what it did ---------------------------------------------------------
    def job_base_url(self, port: int = RELAY_PORT) -> str:
        """The base URL the job uses: its loopback relay's port, the configured path."""
        return f"http://127.0.0.1:{port}{self.path}"

    @property
    def counts(self) -> dict[str, int]:
        """Requests and tokens counted so far (:data:`COUNT_KEYS`)."""
        with self._lock:
            return dict(self._counts)

    @property
    def progress(self) -> LLMProgress:
        """Answers received, requests planned and tokens so far (:class:`LLMProgress`)."""
        with self._lock:
            seconds = None if self._first_request is None else time.monotonic() - self._first_request
            return LLMProgress(self._answered, self._planned, self._counts["completion_tokens"], seconds)

    def _note_request(self, planned_header: str | None) -> None:
        """Count a POST request and keep the largest planned count its header states."""
        planned = planned_claim(planned_header)
        with self._lock:
            self._counts["requests"] += 1
            if self._first_request is None:
                self._first_request = time.monotonic()
            if planned is not None:
                self._planned = max(self._planned, planned)
            warn = planned is None and planned_header is not None and not self._bad_planned_seen
            self._bad_planned_seen = self._bad_planned_seen or warn
        if warn:
            log.warning("llm proxy: ignoring %s %r (not a whole number up to %d); the progress output shows "
                        "no planned count for it", PLANNED_HEADER, planned_header[:40], MAX_PLANNED)

    def _note_answer(self, data: bytes, content_type: str, encoding: str) -> None:
        """Count an answer and the tokens its server reported (one unmetered answer when it reported none)."""
        usage = usage_of(data, content_type, encoding) or {"unmetered": 1}
        with self._lock:
            self._answered += 1
            for key, value in usage.items():
                self._counts[key] += value

    # -- forwarding ------------------------------------------------------------------------------------
    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # HTTP/1.0: one request per connection, closed after the response; a client that keeps
            # connections alive opens a new one, and no response needs re-framing.
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's signature
                # A Unix socket has no client address to print (the base class would fail on it).
                log.debug("llm proxy: " + format, *args)

            def _refuse(self, status: int, message: str) -> None:
                data = json.dumps({"error": {"message": message, "type": "openpert_proxy_error"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - name required by BaseHTTPRequestHandler
                self._forward(None)

            def do_POST(self) -> None:  # noqa: N802 - name required by BaseHTTPRequestHandler
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    self._refuse(411, "the language-model proxy needs a Content-Length (chunked requests are not forwarded)")
                    return
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_REQUEST_BYTES:
                    self._refuse(413, f"request body of {self.headers.get('Content-Length')!r} bytes; at most {MAX_REQUEST_BYTES}")
                    return
                self._forward(self.rfile.read(length))

            def _forward(self, body: bytes | None) -> None:
                target = urllib.parse.urlsplit(self.path)
                path = target.path
                # An absolute URL in the request line (proxy-style) names another server: refused too.
                if target.scheme or target.netloc or not (path == proxy.path or path.startswith(proxy.path + "/")) \
                        or "/../" in path + "/":
                    self._refuse(403, f"the language-model proxy forwards {proxy.path}/... only, not {path}")
                    return
                if body is not None:
                    proxy._note_request(self.headers.get(PLANNED_HEADER))
                # The planned count is for the harness: the server gets the request without it.
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in HOP_BY_HOP and k.lower() not in ("host", PLANNED_HEADER.lower())}
                headers["Host"] = proxy.host_header
                if proxy._api_key is not None:
                    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                    headers["Authorization"] = f"Bearer {proxy._api_key}"
                if proxy._tls is not None:
                    connection = http.client.HTTPSConnection(proxy.host, proxy.port, timeout=proxy.timeout, context=proxy._tls)
                else:
                    connection = http.client.HTTPConnection(proxy.host, proxy.port, timeout=proxy.timeout)
                try:
                    # Path and query only: an absolute URL in the request line is not followed elsewhere.
                    forwarded = path + (f"?{target.query}" if target.query else "")
                    connection.request(self.command, forwarded, body=body, headers=headers)
                    response = connection.getresponse()
                    self._relay(response, metered=body is not None)
                except (OSError, http.client.HTTPException) as err:
                    if not self.wfile.closed:
                        try:
                            self._refuse(502, f"the language-model proxy could not reach {proxy.base_url}: "
                                              f"{type(err).__name__}: {err}")
                        except OSError:
                            pass  # the job closed its end too: nobody is left to tell
                finally:
                    connection.close()

            def _relay(self, response: http.client.HTTPResponse, *, metered: bool) -> None:
                content_type = response.getheader("Content-Type") or ""
                encoding = response.getheader("Content-Encoding") or ""
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                metered = metered and 200 <= response.status < 300
                streamed = "text/event-stream" in content_type.lower()
                if streamed:
                    # Events are passed on as they come (no length: the connection's end ends the body,
                    # after the usage is counted).
                    self.end_headers()
                    chunks = []
                    while chunk := response.read1(65536):
                        chunks.append(chunk)
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    if metered:
                        proxy._note_answer(b"".join(chunks), content_type, encoding)
                else:
                    data = response.read()
                    # Counted before the job has the answer: a job that ends once it has read it
                    # (its Content-Length says when) leaves counts that include it.
                    if metered:
                        proxy._note_answer(data, content_type, encoding)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        return Handler
