"""What a WebAssembly component may reach and how wf stops one: the probe
components (tests/wasm/probe*, built by tests/wasm/build.sh) served by the real
`wf` as configured `kind = "wasm"` sources, called with the official Python client.

- A component has no filesystem, environment, sockets or network unless the
  operator grants them per source (`dirs`, `env`, `allow_hosts`), and then only
  what was granted: the same component is served twice, bare and granted.
- A component that never yields is stopped at its CPU deadline (`timeout_ms`),
  one that allocates without bound at its memory limit (`memory_mb`), and a trap
  fails only its call; every other call, before and after, is served.
- A pinned component whose bytes change is refused; `wf check --deep` reports a
  component's schema problem, and `wf check --call` the tools that trap or hit a limit.

The outgoing HTTP requests go to a server of this module on 127.0.0.1, the only
host listed; `localhost` (the same server under a name not listed) is refused.
One `wf serve --http` serves the tests that share its config.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import HttpServer, Wf, call_outcome, content_text, toml_config, wait_listed
from wasm_support import DISCOVERY, LISTED_TIMEOUT, OP_TIMEOUT, component, ok

pytestmark = pytest.mark.anyio

SECRET = "granted-value-7c1e"
ALLOWED_BODY = "hello from the allowed host"


@dataclass
class Site:
    """A loopback HTTP server that answers every GET and records its Host header."""

    port: int = 0
    hosts: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    seen = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            seen.hosts.append(self.headers.get("Host", ""))
            body = ALLOWED_BODY.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Served:
    wf: Wf
    server: HttpServer
    data: Path  # granted read-only as /data
    out: Path  # granted read-write as /out


@pytest.fixture(scope="module")
def served(wf_module: Wf, site: Site) -> Served:
    wf = wf_module
    components = wf.root / "components"
    components.mkdir()
    probe = shutil.copy2(component("probe.wasm"), components / "probe.wasm")
    probe_js = shutil.copy2(component("probe-js.wasm"), components / "probe-js.wasm")
    data, out = wf.root / "data", wf.root / "out"
    data.mkdir()
    out.mkdir()
    (data / "hello.txt").write_text("a granted file\n")
    config = wf.write_config(toml_config({
        # The same probe, with nothing granted (and the default limits), and with two
        # directories, a value and tight limits.
        "bare": {"kind": "wasm", "path": str(probe)},
        "granted": {
            "kind": "wasm", "path": str(probe), "env": ["PROBE_SECRET"],
            "dirs": [{"host": str(data), "guest": "/data", "mode": "ro"},
                     {"host": str(out), "guest": "/out", "mode": "rw"}],
            "timeout_ms": 5000, "memory_mb": 128,
        },
        # The JavaScript probe fetches; only `web` may reach 127.0.0.1.
        "offline": {"kind": "wasm", "path": str(probe_js)},
        "web": {"kind": "wasm", "path": str(probe_js), "allow_hosts": ["127.0.0.1"]},
    }, server=DISCOVERY))
    # PROBE_SECRET is in wf's environment; only `granted` names it.
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env={"PROBE_SECRET": SECRET})
    return Served(wf=wf, server=server, data=data, out=out)


class Ready:
    """`async with Ready(served, tools…) as c`: a client, after its tools are listed."""

    def __init__(self, s: Served, *tools: str) -> None:
        self.client = s.wf.http_client(s.server)
        self.tools = tools

    async def __aenter__(self) -> Client:
        c = await self.client.__aenter__()
        for tool in self.tools:
            await wait_listed(c, tool, LISTED_TIMEOUT)
        return c

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.__aexit__(*exc)


async def refused(c: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Calls a tool that must fail; returns the error's text (an MCP error or an isError result)."""
    with anyio.fail_after(OP_TIMEOUT):
        result, error = await call_outcome(c, tool, arguments)
    assert error is not None, f"{tool} {arguments} succeeded: {result}"
    return error


async def text_of(c: Client, tool: str, arguments: dict[str, Any]) -> str:
    return content_text((await ok(c, tool, arguments)).content)


# ---------------------------------------------------------------- capabilities


async def test_files_are_reached_only_as_granted(served: Served) -> None:
    async with Ready(served, "bare__read_file", "granted__read_file") as c:
        error = await refused(c, "bare__read_file", {"path": "/data/hello.txt"})
        assert error.startswith(("FileNotFoundError", "PermissionError")), error
        assert await text_of(c, "granted__read_file", {"path": "/data/hello.txt"}) == "a granted file\n"
        # Outside the grant: nothing of the host's filesystem.
        error = await refused(c, "granted__read_file", {"path": "/etc/hostname"})
        assert error.startswith(("FileNotFoundError", "PermissionError")), error
        # A read-only grant refuses a write; a read-write one takes it.
        error = await refused(c, "granted__write_file", {"path": "/data/new.txt", "text": "x"})
        assert error.startswith(("PermissionError", "OSError")), error
        assert not (served.data / "new.txt").exists()
        assert await text_of(c, "granted__write_file", {"path": "/out/new.txt", "text": "written by the probe"}) == "written"
        assert (served.out / "new.txt").read_text() == "written by the probe"


async def test_environment_values_are_seen_only_when_named(served: Served) -> None:
    async with Ready(served, "bare__env", "granted__env") as c:
        assert await refused(c, "bare__env", {"name": "PROBE_SECRET"}) == "LookupError: no environment value PROBE_SECRET"
        assert await text_of(c, "granted__env", {"name": "PROBE_SECRET"}) == SECRET
        # wf's own environment (HOME is set for every wf the tests start) is not the component's.
        assert await refused(c, "granted__env", {"name": "HOME"}) == "LookupError: no environment value HOME"


async def test_sockets_are_never_granted(served: Served, site: Site) -> None:
    before = len(site.hosts)
    async with Ready(served, "granted__connect") as c:
        error = await refused(c, "granted__connect", {"host": "127.0.0.1", "port": site.port})
    assert error.split(":")[0] in {"PermissionError", "OSError", "ConnectionRefusedError", "ModuleNotFoundError",
                                   "AttributeError", "NotImplementedError"}, error
    assert len(site.hosts) == before


async def test_http_reaches_only_the_listed_hosts(served: Served, site: Site) -> None:
    allowed = f"http://127.0.0.1:{site.port}/allowed"
    unlisted = f"http://localhost:{site.port}/unlisted"
    async with Ready(served, "offline__fetch", "web__fetch") as c:
        before = len(site.hosts)
        # No host listed: the request never leaves.
        await refused(c, "offline__fetch", {"url": allowed})
        assert len(site.hosts) == before, site.hosts
        # Listed: it does.
        assert await text_of(c, "web__fetch", {"url": allowed}) == f"200 {ALLOWED_BODY}"
        assert site.hosts[before:] == [f"127.0.0.1:{site.port}"]
        # The same server under a name that is not listed: refused before it is reached.
        await refused(c, "web__fetch", {"url": unlisted})
        assert len(site.hosts) == before + 1, site.hosts
    # wf's log says which source was refused which host.
    denied = [line for line in served.server.log.read_text().splitlines() if "outgoing HTTP request denied" in line]
    assert any("source=offline host=127.0.0.1" in line for line in denied), denied
    assert any("source=web host=localhost" in line for line in denied), denied


# ---------------------------------------------------------------- limits


async def test_a_call_that_never_yields_is_stopped_at_its_deadline(served: Served) -> None:
    """`granted.spin` loops forever: its call fails naming the limit when its CPU
    deadline passes, while other calls are served, and the next call works."""
    finished: list[str] = []
    async with Ready(served, "granted__spin", "bare__echo", "wf_std__const") as c:
        outcome: dict[str, Any] = {}

        async def spin() -> None:
            outcome["spin"] = await refused(c, "granted__spin", {})
            finished.append("spin")

        async with anyio.create_task_group() as tg:
            tg.start_soon(spin)
            # Served while the spin runs: another source of the same component, and wf.std.
            assert await text_of(c, "bare__echo", {"text": "still here"}) == "still here"
            assert (await ok(c, "wf_std__const", {"value": 7})).structured_content == {"value": 7}
            finished.append("others")
        assert finished == ["others", "spin"], finished
        error = outcome["spin"]
        assert "stopped at its CPU deadline (timeout_ms = 5000)" in error, error
        assert await text_of(c, "granted__echo", {"text": "after the deadline"}) == "after the deadline"


async def test_unbounded_allocation_is_stopped_at_the_memory_limit(served: Served) -> None:
    async with Ready(served, "granted__allocate") as c:
        assert await text_of(c, "granted__allocate", {"mb": 8}) == "allocated 8 MiB"
        error = await refused(c, "granted__allocate", {"mb": 4096})
        assert "stopped at its memory limit (memory_mb = 128)" in error, error
        assert await text_of(c, "granted__allocate", {"mb": 8}) == "allocated 8 MiB"
        assert await text_of(c, "granted__echo", {"text": "after the limit"}) == "after the limit"


async def test_a_trap_fails_only_its_call(served: Served) -> None:
    async with Ready(served, "bare__trap", "bare__echo", "granted__read_file") as c:
        assert await text_of(c, "bare__echo", {"text": "before"}) == "before"
        error = await refused(c, "bare__trap", {})
        assert "the component trapped" in error, error
        assert await text_of(c, "bare__echo", {"text": "after"}) == "after"
        assert await text_of(c, "granted__read_file", {"path": "/data/hello.txt"}) == "a granted file\n"


# ---------------------------------------------------------------- pinning and checks


def test_a_pinned_component_that_changes_is_refused(wf: Wf) -> None:
    path = wf.install_file(component("probe.wasm"))
    pinned = wf.run("plugins", "--pin", str(path), *wf.plugin_args(), timeout=OP_TIMEOUT)
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout.startswith("pinned component probe sha256:"), pinned.stdout
    doc = wf.plugins_json()
    [listed] = doc["components"]
    assert listed["pinned"] is True and not doc["refused"], doc
    # Another build under the same name: refused before it is compiled, naming both hashes.
    path.write_bytes(component("probe-js.wasm").read_bytes())
    proc = wf.run("plugins", "--json", *wf.plugin_args())
    assert proc.returncode == 1, proc.stderr  # something was refused
    doc = json.loads(proc.stdout)
    refusals = json.dumps(doc["refused"])
    assert "pinned file changed" in refusals and "probe.wasm" in refusals, doc
    assert doc["components"] == [], doc


def test_check_deep_reports_a_components_schema_problem(wf: Wf) -> None:
    probe = wf.root / "probe.wasm"
    shutil.copy2(component("probe.wasm"), probe)
    good = wf.write_config(toml_config({"fine": {"kind": "wasm", "path": str(probe)}}, server=DISCOVERY), "good.toml")
    proc = wf.run("check", "--config", str(good), "--deep", *wf.plugin_args(), timeout=LISTED_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    config = wf.write_config(
        toml_config({"odd": {"kind": "wasm", "path": str(probe)}}, server=DISCOVERY)
        + "[sources.odd.settings]\nbroken_schema = true\n"
    )
    proc = wf.run("check", "--config", str(config), "--deep", *wf.plugin_args(), timeout=LISTED_TIMEOUT)
    assert proc.returncode == 1, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith(f"{config}: sources.odd")]
    assert len(lines) == 1, proc.stderr
    assert lines[0].endswith('tool "broken" left out: inputSchema must have "type": "object" (MCP requires it)'), lines


def test_check_call_names_the_tools_that_crash(wf: Wf) -> None:
    """`wf check --call` calls every tool of a component once, with arguments made from
    its input schema: the probe's `trap` (the component traps) and `spin` (stopped at its
    deadline) are named, its tools that answer or fail in their own words are not; the
    units example passes."""
    probe = wf.root / "probe.wasm"
    shutil.copy2(component("probe.wasm"), probe)
    config = wf.write_config(
        toml_config({"crashy": {"kind": "wasm", "path": str(probe), "timeout_ms": 1000}}, server=DISCOVERY),
        "crashy.toml",
    )
    proc = wf.run("check", "--config", str(config), "--call", *wf.plugin_args(), timeout=LISTED_TIMEOUT)
    assert proc.returncode == 1, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith(f"{config}: sources.crashy: ")]
    assert len(lines) == 2, proc.stderr
    trapped, spun = sorted(lines, reverse=True)  # "tool \"trap\"…" sorts after "tool \"spin\"…"
    assert 'tool "trap" called with {}: trapped: the component trapped' in trapped, lines
    assert 'tool "spin" called with {}: stopped at a limit: ' in spun and "timeout_ms = 1000" in spun, lines
    assert "called: crashy: 8 tools: " in proc.stdout and ", 2 with a problem" in proc.stdout, proc.stdout

    units = wf.root / "units.wasm"
    shutil.copy2(component("units-py.wasm"), units)
    config = wf.write_config(toml_config({"units": {"kind": "wasm", "path": str(units)}}, server=DISCOVERY), "units.toml")
    proc = wf.run("check", "--config", str(config), "--call", *wf.plugin_args(), timeout=LISTED_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    # convert answers (its structured result matches its output schema); convert_many,
    # asked with no target unit and nobody to ask, fails in its own words.
    assert "called: units: 2 tools: 1 answered, 1 failed in their own words, 0 with a problem" in proc.stdout, proc.stdout
