"""What the @playwright/mcp tests share: where the server and Debian's chromium
are, and a loopback web server for the pages they browse."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import E2E_DIR

CHROMIUM = Path(os.environ.get("WF_CHROMIUM") or "/usr/bin/chromium")
PLAYWRIGHT_MCP_DEFAULT = E2E_DIR / "node_modules" / ".bin" / "playwright-mcp"


def require_playwright_mcp() -> Path:
    """The @playwright/mcp binary; fails (never skips) when it or chromium is missing."""
    path = Path(os.environ.get("WF_PLAYWRIGHT_MCP_BIN") or PLAYWRIGHT_MCP_DEFAULT)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run tests/run (or `npm ci` in tests/e2e), or set WF_PLAYWRIGHT_MCP_BIN")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: tests/run installs Debian's chromium (apt-get install -y chromium)")
    return path


@contextmanager
def serve_pages(page: Callable[[str], bytes]) -> Iterator[str]:
    """Serves `page(path)` as HTML on 127.0.0.1 (Python's http.server, in a
    thread); yields the base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = page(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
