"""Shared fixtures of the end-to-end suite.

The suite drives the real, built `wf` binary (and the plugins next to it) with
independent peers, chiefly the official Python `mcp` client. Every `wf` it
starts gets its own temporary working directory, HOME, XDG dirs, state
directory (--state-dir) and plugins folder (--plugins), and none of the
caller's `WF_*` variables (WF_CONFIG, WF_LOG, WF_HTTP_TOKEN...), so a
developer's own configuration never leaks into a test.

Environment:
  WF_BIN            the `wf` binary (default: <repo>/target/debug/wf)
  WF_FIXTURES_DIR   where the fixture plugins were built
                    (default: <repo>/target/fixtures/debug)
  WF_E2E_NO_BUILD   set to 1 to never run cargo from the tests (missing fixture
                    plugins then fail the tests that need them)
  WF_FIXTURE_UPSTREAM  the Rust upstream MCP fixture server
                    (default: wf-fixture-upstream next to WF_BIN)
  WF_EVERYTHING_BIN @modelcontextprotocol/server-everything's bin
                    (default: tests/e2e/node_modules/.bin/mcp-server-everything,
                    installed by tests/run with `npm ci`)
  WF_PLAYWRIGHT_MCP_BIN  @playwright/mcp's bin (test_playwright.py; default:
                    tests/e2e/node_modules/.bin/playwright-mcp, from `npm ci`)
  WF_CHROMIUM       the browser it drives (default: /usr/bin/chromium, Debian's;
                    tests/run installs it when missing)

`tests/run` builds everything first; when a fixture plugin is missing (say,
you run pytest by hand), the suite builds the fixture crates itself into
target/fixtures, never next to `wf` (wf loads every library in its own folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

REPO = Path(__file__).resolve().parents[2]

# Fixture crates under tests/fixtures/<dir>: package name = "fixture-<dir>".
# Every crate under tests/fixtures is a fixture plugin (tests/run reads the same folder).
FIXTURE_CRATES = tuple(sorted(p.parent.name for p in (REPO / "tests" / "fixtures").glob("*/Cargo.toml")))

# Plugins that sit next to `wf` in target/debug after `cargo build --workspace`.
STD_PLUGIN = "wf-source-std"

# How long a started `wf serve --http` may take to accept connections.
HTTP_START_TIMEOUT = 30.0

E2E_DIR = Path(__file__).resolve().parent
EVERYTHING_BIN_DEFAULT = E2E_DIR / "node_modules" / ".bin" / "mcp-server-everything"

# Never route the tests' loopback requests through a proxy from the environment.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost,::1"

# Modules that tests/run keeps out of the parallel pass (pytest-xdist) and runs
# alone afterwards: they load the machine themselves (hundreds of clients, a
# browser) or judge wall-clock behaviour that a busy neighbour would blur.
SERIAL_MODULES = frozenset(
    {
        "test_load.py",
        "test_cold_start.py",
        "test_promise_timeouts.py",
        "test_cancellation.py",
        "test_http_hardening.py",
        "test_hostile.py",
        "test_console.py",
        "test_playwright.py",
        # Its console test waited 120 s in vain for a held tool's row under the
        # parallel pass in CI, and passes alone in 3 s.
        "test_tool_pins.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every test of a [`SERIAL_MODULES`] module `serial`."""
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


# --------------------------------------------------------------------------- helpers


def dylib_filename(lib_name: str) -> str:
    """File name of the dynamic library of crate lib `lib_name` on this platform."""
    if sys.platform == "darwin":
        return f"lib{lib_name}.dylib"
    if sys.platform == "win32":
        return f"{lib_name}.dll"
    return f"lib{lib_name}.so"


def fixture_filename(crate_dir: str) -> str:
    """`call-panics` -> `libfixture_call_panics.so`."""
    return dylib_filename("fixture_" + crate_dir.replace("-", "_"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return "\n".join(text.splitlines()[-lines:])


def content_text(blocks: Any) -> str:
    """The text of an MCP content block or list of blocks (non-text blocks ignored)."""
    if blocks is None:
        return ""
    if not isinstance(blocks, (list, tuple)):
        blocks = [blocks]
    return "\n".join(t for b in blocks if isinstance(t := getattr(b, "text", None), str))


async def _all_pages(fetch: Any, attr: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await fetch(cursor=cursor)
        items += getattr(page, attr)
        cursor = page.next_cursor
        if not cursor:
            return items
    pytest.fail(f"{attr} pagination did not end after 100 pages")


async def all_tools(c: Client) -> list[Any]:
    """Every tool, following tools/list cursors."""
    return await _all_pages(c.list_tools, "tools")


async def wait_listed(c: Client, tool: str, timeout: float = 60.0) -> list[Any]:
    """Waits until `tool` is listed (its source is discovered); returns every tool.
    A source can take longer than the startup grace to be discovered on a loaded
    machine (node peers especially): wait for the event, not a duration."""
    with anyio.move_on_after(timeout):
        while True:
            tools = await all_tools(c)
            if any(t.name == tool for t in tools):
                return tools
            await anyio.sleep(0.1)
    pytest.fail(f"{tool} was not listed within {timeout}s")


async def all_prompts(c: Client) -> list[Any]:
    """Every prompt, following prompts/list cursors."""
    return await _all_pages(c.list_prompts, "prompts")


async def all_resources(c: Client) -> list[Any]:
    """Every resource, following resources/list cursors."""
    return await _all_pages(c.list_resources, "resources")


async def all_templates(c: Client) -> list[Any]:
    """Every resource template, following resources/templates/list cursors."""
    return await _all_pages(c.list_resource_templates, "resource_templates")


def toml_value(v: Any) -> str:
    """A Python value as a TOML value (strings, numbers, booleans, lists, inline tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string for everything the tests write
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {v!r}")


def toml_config(sources: dict[str, dict[str, Any]], server: dict[str, Any] | None = None) -> str:
    """A wf config in TOML: `[server]` (optional) and one `[sources.NAME]` table per source."""
    out: list[str] = []
    if server:
        out.append("[server]")
        out += [f"{k} = {toml_value(v)}" for k, v in server.items()]
        out.append("")
    for name, settings in sources.items():
        out.append(f"[sources.{json.dumps(name)}]")
        out += [f"{k} = {toml_value(v)}" for k, v in settings.items()]
        out.append("")
    return "\n".join(out)


# ---- processes (Linux /proc)


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    state: str
    starttime: int  # clock ticks since boot: tells a pid apart from a reused one


def proc_info(pid: int) -> ProcInfo | None:
    """`/proc/PID/stat` of a process, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rindex(")") + 2 :].split()
    return ProcInfo(pid=pid, ppid=int(rest[1]), state=rest[0], starttime=int(rest[19]))


def all_procs() -> list[ProcInfo]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and (info := proc_info(int(d))) is not None:
            out.append(info)
    return out


def children_of(pid: int) -> list[ProcInfo]:
    """Processes whose parent is `pid` now (zombies included)."""
    return [p for p in all_procs() if p.ppid == pid]


def descendants_of(pid: int) -> list[ProcInfo]:
    """Every process below `pid` now (children, grandchildren...)."""
    procs = all_procs()
    by_parent: dict[int, list[ProcInfo]] = {}
    for p in procs:
        by_parent.setdefault(p.ppid, []).append(p)
    out: list[ProcInfo] = []
    todo = [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def still_there(p: ProcInfo) -> ProcInfo | None:
    """The same process (same pid and start time) if it still exists — alive or a zombie."""
    now = proc_info(p.pid)
    return now if now is not None and now.starttime == p.starttime else None


def wait_processes_gone(procs: list[ProcInfo], timeout: float = 5.0) -> list[ProcInfo]:
    """Waits until none of `procs` exists any more (not even as a zombie); returns the survivors."""
    deadline = time.monotonic() + timeout
    while True:
        left = [now for p in procs if (now := still_there(p)) is not None]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


async def call_outcome(c: Client, name: str, arguments: dict[str, Any] | None = None) -> tuple[Any, str | None]:
    """Calls a tool; returns (result, None) on success, or (result or None, error text)
    when the call failed, either as an MCP error or as a result with isError."""
    try:
        result = await c.call_tool(name, arguments or {})
    except MCPError as e:
        return None, f"{e.message} {json.dumps(e.data) if e.data is not None else ''}".strip()
    if result.is_error:
        return result, content_text(result.content)
    return result, None


async def wait_processes_gone_async(procs: list[ProcInfo], timeout: float = 5.0) -> list[ProcInfo]:
    """Like wait_processes_gone, without blocking the event loop (for use while a client is open)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [now for p in procs if (now := still_there(p)) is not None]
        if not left or time.monotonic() > deadline:
            return left
        await anyio.sleep(0.05)


def stop_process(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaps."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)
    else:
        proc.wait()


# ---- the upstream fixture's event journal


@dataclass
class UpstreamEvents:
    """The `--events PATH` journal of wf-fixture-upstream: one JSON object per line,
    written by the upstream itself (a slow call starting, a `notifications/cancelled`
    arriving, a slow call ending), so a test observes what reached the upstream."""

    path: Path

    def args(self) -> list[str]:
        """The fixture's command-line arguments that turn the journal on."""
        return ["--events", str(self.path)]

    def read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        # Only whole lines: a line being appended right now is read next time.
        return [json.loads(line) for line in text.split("\n")[:-1] if line]

    async def wait_for(self, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """Waits for the first event whose fields include `fields`; returns it."""
        with anyio.move_on_after(timeout):
            while True:
                for event in self.read():
                    if all(event.get(k) == v for k, v in fields.items()):
                        return event
                await anyio.sleep(0.05)
        pytest.fail(f"the upstream never recorded {fields} within {timeout}s; it recorded:\n{self.read()}")


# --------------------------------------------------------------------------- wf


@dataclass
class HttpServer:
    """A running `wf serve --http`."""

    proc: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return (
            f"http://127.0.0.1:{self.port}"
            if self.host in ("0.0.0.0", "127.0.0.1")
            else f"http://{self.host}:{self.port}"
        )

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base_url}/mcp"

    def stop(self) -> None:
        stop_process(self.proc)


@dataclass
class Wf:
    """One isolated `wf` installation: a temp plugins folder, state dir, HOME and cwd."""

    bin: Path
    fixtures_dir: Path
    root: Path
    logs: list[Path] = field(default_factory=list)
    _servers: list[HttpServer] = field(default_factory=list)
    _files: list[TextIO] = field(default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for d in (self.plugin_dir, self.state_dir, self.home, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def plugin_dir(self) -> Path:
        return self.root / "plugins"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    # ---- environment and files

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a `wf` started by the tests: no inherited WF_* settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("WF_")}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local/share"),
            XDG_STATE_HOME=str(self.home / ".local/state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            NO_COLOR="1",
        )
        env.update(extra or {})
        return env

    def stdio_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """What to pass as `StdioServerParameters.env` (merged over the client's whitelist)."""
        full = self.env(extra)
        keep = {"HOME", "NO_COLOR", "RUST_BACKTRACE", "RUST_LOG", "NO_PROXY", "no_proxy", *(extra or {})}
        return {k: v for k, v in full.items() if k in keep or k.startswith(("WF_", "XDG_"))}

    def new_log(self, what: str) -> Path:
        path = self.log_dir / f"{len(self.logs):02d}-{what}.log"
        self.logs.append(path)
        return path

    def fixture_lib(self, crate_dir: str) -> Path:
        path = self.fixtures_dir / fixture_filename(crate_dir)
        if not path.exists():
            pytest.fail(f"fixture plugin {path} is missing; build it with tests/run")
        return path

    def install(self, crate_dir: str, as_name: str | None = None) -> Path:
        """Copies fixture plugin `crate_dir` into the plugins folder (optionally renamed)."""
        src = self.fixture_lib(crate_dir)
        dst = self.plugin_dir / (as_name or src.name)
        shutil.copy2(src, dst)
        return dst

    def write_config(self, text: str, name: str = "wf.toml") -> Path:
        """Writes a config file into the test's root; returns its path."""
        path = self.root / name
        path.write_text(text)
        return path

    def install_file(self, src: Path, as_name: str | None = None) -> Path:
        dst = self.plugin_dir / (as_name or src.name)
        shutil.copy2(src, dst)
        return dst

    # ---- one-shot commands

    def run(
        self, *args: str, timeout: float = 60, env: dict[str, str] | None = None, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Runs `wf <args>` to completion; stdout and stderr captured as text."""
        proc = subprocess.run(
            [str(self.bin), *args],
            cwd=self.root,
            env=self.env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        log = self.new_log("run")
        log.write_text(
            f"$ wf {' '.join(args)}\n[exit {proc.returncode}]\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}\n"
        )
        if check and proc.returncode != 0:
            pytest.fail(f"wf {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def plugins_json(self, *extra: str) -> dict[str, Any]:
        """`wf plugins --json --plugins <plugin_dir>`, which must exit 0 and print one JSON document."""
        proc = self.run("plugins", "--json", *self.plugin_args(), *extra)
        assert proc.returncode == 0, f"wf plugins --json exited {proc.returncode}:\n{proc.stderr}"
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError as e:
            pytest.fail(f"wf plugins --json did not print JSON ({e}):\n{proc.stdout}")

    # ---- stdio server

    def plugin_args(self) -> list[str]:
        """The options every wf command gets: the test's plugins folder and state dir."""
        return ["--plugins", str(self.plugin_dir), "--state-dir", str(self.state_dir)]

    def serve_args(self, *extra: str) -> list[str]:
        return ["serve", *self.plugin_args(), *extra]

    def stdio_params(self, *extra: str, env: dict[str, str] | None = None) -> StdioServerParameters:
        """Parameters that make the `mcp` client start `wf serve` over stdio."""
        return StdioServerParameters(
            command=str(self.bin), args=self.serve_args(*extra), env=self.stdio_env(env), cwd=str(self.root)
        )

    def stdio_client(self, mode: str = "auto", *extra: str, env: dict[str, str] | None = None, **kw: Any) -> Client:
        """An `mcp.Client` (not yet entered) that starts `wf serve` over stdio, stderr to a log file."""
        errlog = self.new_log("stdio").open("w")
        self._files.append(errlog)
        transport = stdio_client(self.stdio_params(*extra, env=env), errlog=errlog)
        kw.setdefault("read_timeout_seconds", 60)
        return Client(transport, mode=mode, cache=None, **kw)

    # ---- HTTP server

    def start_http(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        *extra: str,
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> HttpServer:
        """Starts `wf serve --http <host>:<port>` and (by default) waits until it accepts connections."""
        port = port or free_port()
        log = self.new_log("http")
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [str(self.bin), *self.serve_args("--http", f"{host}:{port}", *extra)],
                cwd=self.root,
                env=self.env(env),
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=subprocess.STDOUT,
            )
        server = HttpServer(proc=proc, host=host, port=port, log=log)
        self._servers.append(server)
        if wait:
            deadline = time.monotonic() + HTTP_START_TIMEOUT
            while not port_accepts("127.0.0.1", port):
                if proc.poll() is not None:
                    pytest.fail(f"wf serve --http exited {proc.returncode} before listening:\n{tail(log)}")
                if time.monotonic() > deadline:
                    server.stop()
                    pytest.fail(f"wf serve --http did not listen on {port} within {HTTP_START_TIMEOUT}s:\n{tail(log)}")
                time.sleep(0.05)
        return server

    def http_client(self, server: HttpServer, mode: str = "auto", **kw: Any) -> Client:
        kw.setdefault("read_timeout_seconds", 60)
        return Client(server.url, mode=mode, cache=None, **kw)

    def client(self, transport: str, mode: str, *extra: str, env: dict[str, str] | None = None) -> Client:
        """A client (not yet entered) of a new `wf serve <extra>` over `transport`
        ("stdio", or "http": a `wf serve --http` on a free loopback port) in `mode`."""
        if transport == "stdio":
            return self.stdio_client(mode, *extra, env=env)
        if transport == "http":
            return self.http_client(self.start_http("127.0.0.1", None, *extra, env=env), mode)
        raise ValueError(f"unknown transport {transport!r}")

    # ---- third-party upstream servers

    def start_upstream_http(
        self, what: str, argv: list[str], port: int, env: dict[str, str] | None = None, timeout: float = 30.0
    ) -> str:
        """Starts an upstream MCP server that serves streamable HTTP on 127.0.0.1:`port`
        (in its own process group, killed as a whole at teardown) and waits until it
        accepts connections. Returns its MCP endpoint URL."""
        log = self.new_log(what)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=self.root,
                env={**self.env(), **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs.append(proc)
        deadline = time.monotonic() + timeout
        while not port_accepts("127.0.0.1", port):
            if proc.poll() is not None:
                pytest.fail(f"{what} exited {proc.returncode} before listening on {port}:\n{tail(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"{what} did not listen on {port} within {timeout}s:\n{tail(log)}")
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}/mcp"

    def close(self) -> None:
        for s in self._servers:
            s.stop()
        for p in self._procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        for f in self._files:
            f.close()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def wf_bin() -> Path:
    path = Path(os.environ.get("WF_BIN") or REPO / "target" / "debug" / "wf")
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"wf binary not found at {path}: run tests/run (or cargo build --workspace), or set WF_BIN")
    std = path.parent / dylib_filename("wf_source_std")
    if not std.exists():
        pytest.fail(f"{std} is missing: `cargo build --workspace` builds the plugins next to wf")
    stray = sorted(p.name for p in path.parent.glob(dylib_filename("fixture_*")))
    if stray:
        pytest.fail(
            f"test fixture plugins next to wf in {path.parent} (wf loads them): {stray}. "
            "Delete them; build fixtures only with --target-dir target/fixtures "
            "and exclude them from workspace builds (tests/run does both)"
        )
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The built fixture plugins (built here when missing, unless WF_E2E_NO_BUILD=1)."""
    explicit = os.environ.get("WF_FIXTURES_DIR")
    path = Path(explicit) if explicit else REPO / "target" / "fixtures" / "debug"
    missing = [c for c in FIXTURE_CRATES if not (path / fixture_filename(c)).exists()]
    if missing and not explicit and os.environ.get("WF_E2E_NO_BUILD") != "1":
        cmd = ["cargo", "build", "--locked", "--target-dir", str(REPO / "target" / "fixtures")]
        for c in FIXTURE_CRATES:
            cmd += ["-p", f"fixture-{c}"]
        subprocess.run(cmd, cwd=REPO, check=True)
    return path


@pytest.fixture(scope="session")
def plain_c_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid shared library that is not a wf plugin (no abi_stable root module)."""
    d = tmp_path_factory.mktemp("plain-c")
    src = d / "plain.c"
    src.write_text("int wf_fixture_not_a_plugin(void) { return 42; }\n")
    out = d / dylib_filename("plain")
    cc = os.environ.get("CC", "gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture(scope="session")
def fixture_upstream_bin(wf_bin: Path) -> Path:
    """The Rust stateful upstream fixture server (`wf-fixture-upstream`), built with the workspace."""
    path = Path(os.environ.get("WF_FIXTURE_UPSTREAM") or wf_bin.parent / "wf-fixture-upstream")
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: `cargo build --workspace` (tests/run) builds it, or set WF_FIXTURE_UPSTREAM")
    return path


@pytest.fixture(scope="session")
def everything_bin() -> Path:
    """@modelcontextprotocol/server-everything, installed by tests/run (`npm ci` in tests/e2e)."""
    path = Path(os.environ.get("WF_EVERYTHING_BIN") or EVERYTHING_BIN_DEFAULT)
    if not path.exists() or not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run tests/run (or `npm ci` in tests/e2e), or set WF_EVERYTHING_BIN")
    return path


@pytest.fixture
def wf_logs() -> list[Path]:
    """Log files of the `wf` processes of one test (shown when the test fails)."""
    return []


@pytest.fixture
def wf(wf_bin: Path, fixtures_dir: Path, tmp_path: Path, wf_logs: list[Path]) -> Iterator[Wf]:
    """A fresh isolated `wf` for one test; stops its servers at teardown."""
    w = Wf(bin=wf_bin, fixtures_dir=fixtures_dir, root=tmp_path / "wf", logs=wf_logs)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def upstream_events(wf: Wf) -> UpstreamEvents:
    """A fresh event journal for wf-fixture-upstream (pass `.args()` to the fixture)."""
    return UpstreamEvents(wf.root / "upstream-events.jsonl")


@pytest.fixture
def plugin_dir(wf: Wf) -> Path:
    """The test's temp plugins folder (passed to every wf command as --plugins)."""
    return wf.plugin_dir


@pytest.fixture
def state_dir(wf: Wf) -> Path:
    """The test's temp state directory (passed as --state-dir)."""
    return wf.state_dir


@pytest.fixture
def http_server(wf: Wf) -> HttpServer:
    """`wf serve --http 127.0.0.1:<free port>`, listening."""
    return wf.start_http()


@pytest.fixture
def stdio_params(wf: Wf) -> StdioServerParameters:
    """Parameters to start `wf serve` over stdio with the test's plugins folder."""
    return wf.stdio_params()


@pytest.fixture(scope="module")
def wf_module(wf_bin: Path, fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wf]:
    """An isolated `wf` shared by one test module (e.g. one HTTP server for many tests)."""
    w = Wf(bin=wf_bin, fixtures_dir=fixtures_dir, root=tmp_path_factory.mktemp("wf-module"))
    try:
        yield w
    finally:
        w.close()


# --------------------------------------------------------------------------- reporting


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach the tail of every wf log of a failed test to its report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        logs: list[Path] = list(item.funcargs.get("wf_logs", []) or [])  # type: ignore[attr-defined]
        shared = item.funcargs.get("wf_module")  # type: ignore[attr-defined]
        if isinstance(shared, Wf):
            logs += shared.logs
        for log in logs:
            report.sections.append((f"wf log {log.name}", tail(log, 80)))
