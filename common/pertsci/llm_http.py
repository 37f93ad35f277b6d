"""HTTP for :mod:`pertsci.llm`: requests over kept-alive connections, one per request in flight.

Opening a connection for every request costs a TCP handshake (and a TLS one for ``https``) and,
on the server, a new connection to accept: against a fast server that is most of a request's
time. :class:`HTTPTransport` keeps the connections it opened in a pool and hands one to each
request, so ``max_concurrency`` requests at a time use at most that many connections, each
reused for the next request.

A server may close an idle connection at any time (llama.cpp and vLLM do after a few seconds);
a request that finds its reused connection closed before any answer arrives is sent again on a
new connection, once, so a closed idle connection never costs a retry.

Where a proxy applies (``http_proxy`` and friends name one, and ``no_proxy`` does not exclude the
host), requests go through :mod:`urllib.request`, which speaks to proxies; a loopback host never
uses one (a ``vllm serve`` on 127.0.0.1 is not reachable through a cluster's outbound proxy).
"""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

__all__ = ["HTTPTransport", "Response", "LOOPBACK_HOSTS"]

#: Hosts that are this machine: never reached through a proxy.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: What a reused connection raises when the server had closed it: the request never arrived.
_CLOSED_BY_SERVER = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class Response:
    """An HTTP answer: status, headers (names in lower case) and the whole body."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes):
        self.status = int(status)
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.body = body

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), or ``None``."""
        return self.headers.get(name.lower())


class HTTPTransport:
    """Sends requests to one server over a pool of kept-alive connections.

    Parameters
    ----------
    base_url
        The server's URL (``http`` or ``https``); requests may go to any path on its host.

    Notes
    -----
    Safe to share between threads: each request takes a connection of the pool (or opens one)
    and gives it back when its answer has been read.
    """

    def __init__(self, base_url: str):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL with a host: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.via_proxy = self.host not in LOOPBACK_HOSTS and _proxy_for(parts.scheme, self.host) is not None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}) if self.host in LOOPBACK_HOSTS else urllib.request.ProxyHandler())
        #: Connections opened so far (a new one for each request in flight beyond the idle ones).
        self.connections_opened = 0

    def request(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str],
                timeout: float) -> Response:
        """Send one request and read its whole answer, whatever its status.

        Raises
        ------
        OSError, http.client.HTTPException
            When no answer arrives (refused or dropped connection, timeout).
        """
        if self.via_proxy:
            return self._request_via_urllib(method, url, body, headers, timeout)
        parts = urllib.parse.urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection, reused = self._take(timeout)
        try:
            try:
                answer = self._exchange(connection, method, target, body, headers)
            except _CLOSED_BY_SERVER:
                if not reused:
                    raise
                # The server closed the idle connection: the request did not arrive. Once more, anew.
                connection.close()
                connection, reused = self._open(timeout), False
                answer = self._exchange(connection, method, target, body, headers)
        except BaseException:
            connection.close()
            raise
        status, response_headers, data, keep = answer
        if keep:
            with self._lock:
                self._idle.append(connection)
        else:
            connection.close()
        return Response(status, response_headers, data)

    def close(self) -> None:
        """Close the idle connections (requests in flight close theirs when done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # -- internals ---------------------------------------------------------

    def _take(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            connection = self._idle.pop() if self._idle else None
        if connection is None:
            return self._open(timeout), False
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection, True

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        with self._lock:
            self.connections_opened += 1
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    @staticmethod
    def _exchange(connection: http.client.HTTPConnection, method: str, target: str, body: bytes | None,
                  headers: Mapping[str, str]) -> tuple[int, dict[str, str], bytes, bool]:
        connection.request(method, target, body=body, headers=dict(headers))
        response = connection.getresponse()
        data = response.read()
        # will_close: the server said it closes (HTTP/1.0, "Connection: close"); http.client then
        # has already let go of the socket.
        return response.status, dict(response.getheaders()), data, not response.will_close

    def _request_via_urllib(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str],
                            timeout: float) -> Response:
        request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return Response(response.status, dict(response.headers.items()), response.read())
        except urllib.error.HTTPError as exc:
            try:
                data = exc.read()
            except (OSError, http.client.HTTPException):
                data = b""
            return Response(exc.code, dict(exc.headers.items()) if exc.headers is not None else {}, data)


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the environment names for ``scheme`` (``None``: none, or ``no_proxy`` excludes ``host``)."""
    proxies = urllib.request.getproxies()
    if scheme not in proxies or urllib.request.proxy_bypass(host):
        return None
    return proxies[scheme]
