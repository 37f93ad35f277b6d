"""One file's transfer from a URL or a folder into a partial file, resumable, with a stall timeout.

Nothing here knows checksums or the store's layout: :mod:`openpert.data.fetching` decides what to
fetch from where and installs the result. A failed transfer raises :class:`TransferError` with one
sentence naming the URL and what happened; the bytes already received stay in the partial file only
where the server can resume them (HTTP range requests), and are deleted otherwise.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

#: Bytes read at once; also how often progress is reported.
CHUNK = 1 << 18
USER_AGENT = "openpert-data/1 (+https://github.com/openpert/openpert)"


class TransferError(Exception):
    """A transfer that did not complete; the message names the URL and the cause."""


def local_source(location: str) -> Path | None:
    """The folder or file a mirror location names, when it is local (a path or ``file://``), else ``None``."""
    if location.startswith("file://"):
        return Path(urllib.parse.unquote(urllib.parse.urlparse(location).path))
    if "://" in location:
        return None
    return Path(location)


def join_location(base: str, store_path: str) -> str:
    """The location of ``store_path`` under a mirror (a folder, ``file://`` or ``http(s)://`` URL)."""
    local = local_source(base)
    if local is not None:
        return str(local / store_path)
    return base.rstrip("/") + "/" + urllib.parse.quote(store_path)


def transfer(location: str, partial: Path, *, timeout: float = 60.0, on_bytes: Callable[[int], None] | None = None) -> None:
    """Fetch ``location`` into ``partial``, continuing a partial file where the server allows it.

    Parameters
    ----------
    location
        An ``http(s)://`` or ``file://`` URL, or a local path.
    partial
        The file the bytes go to; when it exists, an HTTP transfer asks for the rest only.
    timeout
        Seconds without a byte (or a connection) before the transfer is given up.
    on_bytes
        Called with the number of bytes of each chunk received (progress).

    Raises
    ------
    TransferError
        A missing file, an HTTP error, no connection, a stall past ``timeout``, or a transfer that
        ended short of its announced length.
    """
    partial.parent.mkdir(parents=True, exist_ok=True)
    local = local_source(location)
    if local is not None:
        _copy_local(local, partial, on_bytes)
    else:
        _download(location, partial, timeout, on_bytes)


def _copy_local(source: Path, partial: Path, on_bytes: Callable[[int], None] | None) -> None:
    if not source.is_file():
        raise TransferError(f"{source}: no such file in the mirror")
    with open(source, "rb") as src, open(partial, "wb") as dst:
        while block := src.read(CHUNK):
            dst.write(block)
            if on_bytes:
                on_bytes(len(block))


def _download(url: str, partial: Path, timeout: float, on_bytes: Callable[[int], None] | None) -> None:
    have = partial.stat().st_size if partial.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    resumable = False
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) only (checked above)
            resumable = response.headers.get("Accept-Ranges", "").lower() == "bytes"
            if have and response.status == 206:
                mode, offset = "ab", have
            else:
                mode, offset = "wb", 0  # the server sent the whole file
            length = response.headers.get("Content-Length")
            expected = offset + int(length) if length and length.isdigit() else None
            received = offset
            with open(partial, mode) as fh:
                while block := response.read(CHUNK):
                    fh.write(block)
                    received += len(block)
                    if on_bytes:
                        on_bytes(len(block))
            if expected is not None and received != expected:
                raise TransferError(f"{url}: transfer ended after {received} of {expected} bytes")
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:
            # The partial file is not a prefix the server recognises: start again from nothing.
            partial.unlink()
            _download(url, partial, timeout, on_bytes)
            return
        _discard(partial, keep=False)
        raise TransferError(f"{url}: HTTP {err.code} {err.reason}") from None
    except TransferError as err:
        raise TransferError(_with_partial(str(err), partial, keep=resumable)) from None
    except http.client.IncompleteRead as err:
        raise TransferError(_with_partial(f"{url}: transfer ended early ({len(err.partial)} bytes of the last read, "
                                          f"{err.expected} more expected)", partial, keep=resumable)) from None
    except TimeoutError:
        raise TransferError(_with_partial(f"{url}: no data for {timeout:g} s (stalled or unreachable)", partial,
                                          keep=resumable)) from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, TimeoutError):
            raise TransferError(_with_partial(f"{url}: no connection within {timeout:g} s", partial, keep=resumable)) from None
        raise TransferError(_with_partial(f"{url}: cannot connect ({reason}); offline? a mirror (--mirror) serves "
                                          "air-gapped sites", partial, keep=resumable)) from None
    except (ConnectionError, http.client.HTTPException, OSError) as err:
        raise TransferError(_with_partial(f"{url}: transfer failed ({err})", partial, keep=resumable)) from None


def _discard(partial: Path, *, keep: bool) -> bool:
    """Delete a partial file unless it can be resumed; whether it was kept."""
    if keep and partial.exists() and partial.stat().st_size > 0:
        return True
    partial.unlink(missing_ok=True)
    return False


def _with_partial(message: str, partial: Path, *, keep: bool) -> str:
    if _discard(partial, keep=keep):
        return f"{message}; the {partial.stat().st_size} bytes received are kept in {partial} to resume from"
    return message

