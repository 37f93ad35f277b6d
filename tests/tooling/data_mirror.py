"""A local HTTP mirror of a data folder, for tests of ``openpert data`` and of real-data runs.

:class:`DataMirrorServer` serves the files of a folder at their paths (the layout of the data
store), on 127.0.0.1 only, with HTTP range requests (so that downloads resume) and faults chosen
by a test: a 404, a transfer cut short, a stall. It counts the requests of each path, so that a
test can say that a second fetch downloaded nothing.

Run it by hand to fill a store from ``../shared/data`` over HTTP, as a site without it would::

    python tests/tooling/data_mirror.py ../shared/data --port 8765
    openpert data fetch --mirror http://127.0.0.1:8765
"""

from __future__ import annotations

import argparse
import http.server
import re
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path

__all__ = ["DataMirrorServer"]

_LOOPBACK = "127.0.0.1"


class DataMirrorServer:
    """Serve ``folder`` over HTTP on 127.0.0.1.

    Parameters
    ----------
    folder
        The files, at their store paths.
    port
        0: any free port.

    Attributes
    ----------
    missing
        Store paths answered with 404 even when present.
    truncate
        Store path -> bytes sent before the connection is closed (the full length is announced).
    stall
        Store path -> seconds to wait before answering.
    requests
        Store path -> number of GET requests received.
    """

    def __init__(self, folder: str | Path, *, port: int = 0):
        self.folder = Path(folder).resolve()
        self.port = port
        self.missing: set[str] = set()
        self.truncate: dict[str, int] = {}
        self.stall: dict[str, float] = {}
        self.requests: Counter[str] = Counter()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError("the mirror is not started")
        return f"http://{_LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> DataMirrorServer:
        """Listen in a background thread."""
        self._server = http.server.ThreadingHTTPServer((_LOOPBACK, self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="data-mirror", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> DataMirrorServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _file(self, url_path: str) -> tuple[str, Path | None]:
        store_path = urllib.parse.unquote(url_path.split("?", 1)[0]).lstrip("/")
        path = (self.folder / store_path).resolve()
        # Only files inside the folder: a request for ../ gets a 404, not the machine's files.
        if self.folder not in path.parents or not path.is_file():
            return store_path, None
        return store_path, path

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: tests read the counters, not the log
                return

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                store_path, path = mirror._file(self.path)
                mirror.requests[store_path] += 1
                if store_path in mirror.stall:
                    time.sleep(mirror.stall[store_path])
                if path is None or store_path in mirror.missing:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = path.read_bytes()
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
                if match:
                    start = int(match.group(1))
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = mirror.truncate.get(store_path)
                if cut is not None and start < cut:
                    self.wfile.write(body[: cut - start])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        return Handler


def main() -> None:
    """Serve a folder until interrupted."""
    parser = argparse.ArgumentParser(description="Serve a data folder over HTTP on 127.0.0.1 (a test mirror).")
    parser.add_argument("folder")
    parser.add_argument("--port", type=int, default=8765)
    ns = parser.parse_args()
    with DataMirrorServer(ns.folder, port=ns.port) as server:
        print(f"serving {server.folder} at {server.base_url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
