"""Shared by the WebAssembly component tests (test_wasm_*.py): where tests/run
built the components (tests/wasm/build.sh), and small call helpers.

WF_WASM_COMPONENTS names the folder with units-py.wasm and units-js.wasm (the
example of docs/wasm-plugins.md in Python and JavaScript), probe.wasm and
probe-js.wasm (tests/wasm/probe*). Without it these tests are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import content_text

OP_TIMEOUT = 120
# Discovery compiles a component first (tens of seconds for 18 MB under a debug wf on a
# loaded machine), past the default 15 s bound: a config's [server] raises it.
DISCOVERY = {"discovery_timeout_ms": 600_000}
LISTED_TIMEOUT = 600


def component(name: str) -> Path:
    """The built component `name` (say "units-py.wasm")."""
    folder = os.environ.get("WF_WASM_COMPONENTS")
    if not folder:
        pytest.skip(
            "WF_WASM_COMPONENTS is not set: build the components with `tests/wasm/build.sh "
            "target/examples/wasm` and set it to that folder (tests/run does both)"
        )
    path = Path(folder) / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: tests/wasm/build.sh {folder} builds it")
    return path


async def ok(c: Client, tool: str, arguments: dict[str, Any], **kw: Any) -> Any:
    """Calls a tool that must succeed; returns the result."""
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.call_tool(tool, arguments, **kw)
    assert not result.is_error, f"{tool}: {content_text(result.content)}"
    return result
