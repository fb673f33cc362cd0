"""WebAssembly components served by a Windows build of wf, run under Wine.

What it shows, with the official Python `mcp` client driving `wf.exe serve` over stdio:

- the docs' units example in Python (componentize-py), dropped into a plugins folder with
  no config, serves its tool, prompt and resource, and `wf.exe run` runs a workflow that
  uses its node;
- the probe components (tests/wasm/probe*), configured with grants, reach files,
  environment values and hosts only as granted; a call that never yields is stopped at its
  deadline and a trap fails only its call, while everything else is served.

Three components, not the five of the Linux e2e tests: compiling several large components
at once is about twenty times slower under Wine than one after another here.

Wine is not Windows: this runs the Windows build's own code (its paths, its job objects,
its DLL loading, wasmtime's Windows code) on Wine's implementation of the Windows API.
It is a manual check (docs/manual/wasm-sources.md, "macOS and Windows"), not part of CI:
the cross build takes longer than CI's budget leaves.

    sudo apt-get install gcc-mingw-w64-x86-64 wine wine64
    rustup target add x86_64-pc-windows-gnu
    cargo build --target x86_64-pc-windows-gnu -p wf-host -p wf-source-wasm -p wf-source-std
    tests/wasm/build.sh target/examples/wasm
    tests/e2e/.venv/bin/python tests/wine/serve_components.py \
        --wf-dir target/x86_64-pc-windows-gnu/debug --components target/examples/wasm

Wine 8.0 (Debian 12) lacks bcryptprimitives.dll, which Rust's standard library needs on
Windows: the script builds a stand-in (tests/wine/bcryptprimitives.c) with mingw into the
Wine prefix's system32 (`WINEPREFIX`, default a folder under the temp dir), never beside
wf.exe. Prints one line per check and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PureWindowsPath
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SECRET = "granted-value-7c1e"
BODY = "hello from the allowed host"
# Discovery compiles each component first: tens of seconds under a debug build.
LISTED = 900
CALL = 180


def win(path: Path) -> str:
    """`path` as Wine's Windows programs see it (the Unix root is drive Z:)."""
    return str(PureWindowsPath("Z:\\") / PureWindowsPath(*path.resolve().parts[1:]))


def toml_string(s: str) -> str:
    return json.dumps(s)


class Site:
    """A loopback HTTP server that answers every GET and records its Host header."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        seen = self.hosts

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                seen.append(self.headers.get("Host", ""))
                body = BODY.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    async def run(self, name: str, check: Callable[[], Awaitable[None]], within: float = CALL) -> None:
        try:
            with anyio.fail_after(within):
                await check()
        except Exception as e:  # noqa: BLE001 (every failure is reported, then the next check runs)
            self.failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)
        else:
            print(f"ok    {name}", flush=True)


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def outcome(s: ClientSession, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    """(succeeded, text): an MCP error or an isError result is a failure."""
    try:
        r = await s.call_tool(tool, args)
    except Exception as e:  # noqa: BLE001 (an MCP error is an outcome here)
        return False, str(e)
    return not r.is_error, text(r)


async def wait_listed(s: ClientSession, names: set[str]) -> set[str]:
    with anyio.fail_after(LISTED):
        while True:
            have = {t.name for t in (await s.list_tools()).tools}
            if names <= have:
                return have
            await anyio.sleep(1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wf-dir", type=Path, required=True, help="the folder with wf.exe and the plugins' DLLs")
    ap.add_argument("--components", type=Path, required=True, help="tests/wasm/build.sh's output folder")
    ap.add_argument("--wine", default="wine")
    a = ap.parse_args()
    exe = (a.wf_dir / "wf.exe").resolve()
    if not exe.is_file():
        sys.exit(f"{exe} is missing: build wf for x86_64-pc-windows-gnu first")
    env = {**os.environ, "WINEDEBUG": "-all", "PROBE_SECRET": SECRET}
    env.setdefault("WINEPREFIX", str(Path(tempfile.gettempdir()) / "wf-wineprefix"))
    prepare_prefix(a.wine, env)
    with tempfile.TemporaryDirectory(prefix="wf-wine-") as tmp:
        return anyio.run(serve, Path(tmp), exe, a.components.resolve(), a.wine, env)


def prepare_prefix(wine: str, env: dict[str, str]) -> None:
    """Creates the Wine prefix if needed and gives it the bcryptprimitives.dll stand-in."""
    system32 = Path(env["WINEPREFIX"]) / "drive_c" / "windows" / "system32"
    if not system32.is_dir():
        subprocess.run([wine, "wineboot", "--init"], env=env, check=True, capture_output=True, timeout=600)
    shim = system32 / "bcryptprimitives.dll"
    if not shim.exists():
        source = Path(__file__).with_name("bcryptprimitives.c")
        subprocess.run(["x86_64-w64-mingw32-gcc", "-shared", "-O2", "-o", str(shim), str(source), "-lbcrypt"],
                       check=True)


async def serve(root: Path, exe: Path, built: Path, wine: str, env: dict[str, str]) -> int:
    plugins, state, comps, data, out = (root / n for n in ("plugins", "state", "components", "data", "out"))
    for d in (plugins, state, comps, data, out):
        d.mkdir()
    shutil.copy2(built / "units-py.wasm", plugins / "units.wasm")
    probe = shutil.copy2(built / "probe.wasm", comps / "probe.wasm")
    probe_js = shutil.copy2(built / "probe-js.wasm", comps / "probe-js.wasm")
    (data / "hello.txt").write_text("a granted file\n")
    site = Site()
    config = root / "wf.toml"
    config.write_text(f"""
[server]
discovery_timeout_ms = 600000

[sources.granted]
kind = "wasm"
path = {toml_string(win(probe))}
env = ["PROBE_SECRET"]
timeout_ms = 5000
dirs = [{{ host = {toml_string(win(data))}, guest = "/data", mode = "ro" }},
        {{ host = {toml_string(win(out))}, guest = "/out", mode = "rw" }}]

[sources.web]
kind = "wasm"
path = {toml_string(win(probe_js))}
allow_hosts = ["127.0.0.1"]
""")
    common = ["--plugins", win(plugins), "--state-dir", win(state)]
    params = StdioServerParameters(
        command=wine, args=[str(exe), "serve", *common, "--config", win(config)], env=env, cwd=str(root)
    )
    checks = Checks()
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        init = await s.initialize()
        print(f"wf.exe under Wine: {init.server_info.name} {init.server_info.version}", flush=True)
        wanted = {"units__convert", "granted__read_file", "granted__env", "web__fetch", "granted__spin"}

        async def listed() -> None:
            have = await wait_listed(s, wanted)
            print(f"      {len(have)} tools listed", flush=True)

        await checks.run("the dropped-in Python component and the configured ones are listed", listed, LISTED)

        async def convert() -> None:
            ok, got = await outcome(s, "units__convert", {"value": 26.2, "from": "mi", "to": "km"})
            assert ok and "42.16" in got, got

        await checks.run("units__convert (componentize-py) answers", convert)

        async def prompt_and_resource() -> None:
            p = await s.get_prompt("units__explain_unit", {"unit": "mi"})
            assert p.description == "Explain mi", p
            res = await s.read_resource("units://table")  # type: ignore[arg-type]
            body = res.contents[0].text  # type: ignore[union-attr]
            assert "| `mi` | length | 1609.344 |" in body, body

        await checks.run("its prompt and resource are served", prompt_and_resource)

        async def files() -> None:
            ok, got = await outcome(s, "granted__read_file", {"path": "/data/hello.txt"})
            assert ok and got == "a granted file\n", got
            # Nothing of the host's filesystem beyond the grants.
            for path in ("C:/windows/win.ini", "/windows/win.ini", "Z:/etc/hostname", "/etc/hostname"):
                ok, got = await outcome(s, "granted__read_file", {"path": path})
                assert not ok, (path, got)
            ok, got = await outcome(s, "granted__write_file", {"path": "/data/new.txt", "text": "x"})
            assert not ok and not (data / "new.txt").exists(), got
            ok, got = await outcome(s, "granted__write_file", {"path": "/out/new.txt", "text": "written"})
            assert ok and (out / "new.txt").read_text() == "written", got

        await checks.run("files: read-only and read-write only as granted, nothing else", files)

        async def environment() -> None:
            ok, got = await outcome(s, "granted__env", {"name": "PROBE_SECRET"})
            assert ok and got == SECRET, got
            # wf's own environment is not the component's.
            for name in ("WINEPREFIX", "PATH", "SYSTEMROOT"):
                ok, got = await outcome(s, "granted__env", {"name": name})
                assert not ok, (name, got)

        await checks.run("environment: a value only when named", environment)

        async def http() -> None:
            allowed = f"http://127.0.0.1:{site.port}/allowed"
            ok, got = await outcome(s, "web__fetch", {"url": allowed})
            assert ok and got == f"200 {BODY}", got
            # The same server under a name that is not listed: refused before it is reached.
            ok, got = await outcome(s, "web__fetch", {"url": f"http://localhost:{site.port}/unlisted"})
            assert not ok and site.hosts == [f"127.0.0.1:{site.port}"], (got, site.hosts)

        await checks.run("http: only to the listed host", http)

        async def limits() -> None:
            ok, got = await outcome(s, "granted__spin", {})
            assert not ok and "timeout_ms" in got, got
            ok, got = await outcome(s, "granted__trap", {})
            assert not ok, got
            ok, got = await outcome(s, "granted__echo", {"text": "still here"})
            assert ok and "still here" in got, got

        await checks.run("a spin is stopped at timeout_ms, a trap fails only its call", limits)

    # The server's discovery compiled the components into the state directory: `wf run`
    # reads that catalog and runs the units node beside the std plugin's template.
    doc = {
        "name": "distance",
        "inputs": {"type": "object", "properties": {"miles": {"type": "number"}}, "required": ["miles"]},
        "nodes": [
            {"id": "km", "use": "units.convert", "args": {"value": {"$ref": "inputs.miles"}, "from": "mi", "to": "km"}},
        ],
        "outputs": {"km": {"$ref": "nodes.km.output.value"}},
    }
    flow = root / "distance.json"
    flow.write_text(json.dumps(doc))

    async def workflow() -> None:
        proc = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [wine, str(exe), "run", win(flow), "--input", "miles=26.2", "--config", win(config), *common],
            env=env, cwd=root, capture_output=True, text=True, timeout=LISTED))
        for line in proc.stderr.splitlines():
            if "component ready" in line:
                said = [w for w in line.split() if w.startswith(("source=", "compiled=", "load_ms="))]
                print(f"      wf.exe run: component ready {' '.join(said)}", flush=True)
        report = json.loads(proc.stdout)
        assert proc.returncode == 0 and report["outputs"] == {"km": 42.1648128}, (proc.returncode, report)

    await checks.run("wf.exe run: a workflow runs the component's node", workflow, LISTED)
    print("all checks passed" if not checks.failed else f"{checks.failed} check(s) failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
