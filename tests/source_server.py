"""A loopback HTTP server standing in for GitHub's raw files in tests of `mtbio data get`: it serves copies of the
real data directory's files under the URL paths of their recorded sources (/OWNER/REPO/COMMIT/PATH), an archive
built from the copies of its members, and answers HTTP ranges. `stall_after` makes it stop sending a file halfway."""
from __future__ import annotations

import io
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

from mtbio.tasks.sources import SourceFile, _manifest


def source_files() -> list[SourceFile]:
    """Every file the packaged manifest records."""
    return [f for folder in _manifest() for f in folder.files]


def url_path(entry: SourceFile) -> str:
    return f"/{entry.repo}/{entry.commit}/{quote(entry.archive.path if entry.archive else entry.path)}"


class SourceServer:
    """What each URL path serves (bytes read from `data_dir` when asked), and how the server misbehaves."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.files: dict[str, Path] = {}
        self.archives: dict[str, list[SourceFile]] = {}
        for entry in source_files():
            if entry.archive:
                self.archives.setdefault(url_path(entry), []).append(entry)
            else:
                self.files[url_path(entry)] = data_dir / entry.dest
        self.stall_after: dict[str, int] = {}      # path → bytes sent before it stops sending
        self.corrupt: set[str] = set()             # paths served with one byte changed
        self.requests: list[tuple[str, str]] = []  # (path, Range header)
        self.stopped = threading.Event()
        self.base_url = ""

    def body(self, path: str) -> bytes | None:
        if path in self.files:
            data = self.files[path].read_bytes()
        elif path in self.archives:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as bundle:
                for entry in self.archives[path]:
                    bundle.writestr(entry.path, (self.data_dir / entry.dest).read_bytes())
            data = buffer.getvalue()
        else:
            return None
        if path in self.corrupt:
            data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
        return data


def _handler(server: SourceServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            server.requests.append((self.path, self.headers.get("Range", "")))
            data = server.body(self.path)
            if data is None:
                self.send_error(404)
                return
            start = 0
            wanted = self.headers.get("Range", "")
            if wanted.startswith("bytes="):
                start = int(wanted[len("bytes="):].split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            stall = server.stall_after.get(self.path)
            if stall is not None and start < stall:
                self.wfile.write(data[start:stall])
                self.wfile.flush()
                server.stopped.wait(600)  # stalls until the client is killed or the server shuts down
                return
            self.wfile.write(data[start:])

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve(data_dir: Path) -> Iterator[SourceServer]:
    """A SourceServer on 127.0.0.1 (a free port) in a thread; its `base_url` goes in MTBIO_DATA_BASE_URL."""
    server = SourceServer(data_dir)
    http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    http.daemon_threads = True
    server.base_url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopped.set()
        http.shutdown()
        http.server_close()
