"""Helpers of the client→server forwarding tests (test_forwarding_client.py): a
wf serving the Rust fixture upstream, and a collector of the notifications a
client receives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types

from conftest import Wf, toml_config

OP_TIMEOUT = 30.0


def fixture_source(fixture_upstream_bin: Path, *args: str, **settings: Any) -> dict[str, Any]:
    """The fixture as a stdio source, spoken to in 2025-11-25 unless `protocol` is
    given: these tests are about what a session-era upstream does (subscriptions it
    records, requests mid-call); test_protocol_auto.py covers the 2026-07-28 fixture."""
    return {"command": str(fixture_upstream_bin), "args": list(args), "protocol": "2025-11-25", **settings}


def write_config(wf: Wf, sources: dict[str, dict[str, Any]], server: dict[str, Any] | None = None) -> Path:
    return wf.write_config(toml_config(sources, server=server))


class Updates:
    """The URIs of `notifications/resources/updated` one client received, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._changed = anyio.Event()

    async def handler(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            self.uris.append(str(root.params.uri))
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_count(self, n: int, timeout: float = OP_TIMEOUT) -> None:
        with anyio.fail_after(timeout):
            while len(self.uris) < n:
                await self._changed.wait()
