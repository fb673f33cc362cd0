"""`--log-format json`: every stderr line is one JSON object with the level,
target, message and fields, and the spans it was logged in (a call's span
names its principal); secrets from the environment stay redacted, as in
text; the default stays text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from conftest import HttpServer, Wf, tail

OP_TIMEOUT = 30
SECRET = "s3cr3t-e2e-value-0123456789"


def json_lines(server: HttpServer) -> list[dict[str, Any]]:
    """Every line of the server's stderr, each parsed as JSON (a line that is not JSON fails the test)."""
    lines = [line for line in server.log.read_text(errors="replace").splitlines() if line.strip()]
    assert lines, "no log lines"
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            pytest.fail(f"not a JSON log line ({e}): {line!r}")
    return out


async def wait_logged(server: HttpServer, predicate: Any, what: str, timeout: float = OP_TIMEOUT) -> dict[str, Any]:
    with anyio.move_on_after(timeout):
        while True:
            for line in json_lines(server):
                if predicate(line):
                    return line
            await anyio.sleep(0.05)
    pytest.fail(f"{what} was not logged within {timeout}s:\n{tail(server.log)}")


@pytest.mark.anyio
async def test_json_lines_carry_level_target_message_and_spans(wf: Wf) -> None:
    wf.install("call-panics")
    server = wf.start_http("127.0.0.1", None, "--log-format", "json")
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            with pytest.raises(MCPError, match="panicked"):
                await c.call_tool("panicky__panic", {})
    line = await wait_logged(
        server,
        lambda ln: ln.get("target") == "wf::plugin" and "boom in call_tool" in ln.get("fields", {}).get("message", ""),
        "the plugin's panic",
    )
    assert line["level"] == "ERROR", line
    assert line["fields"]["plugin"] == "fixture-call-panics", line
    assert line["timestamp"], line
    # Logged inside the call: the span and its fields come along.
    assert {"name": "call", "principal": "local"} in line["spans"], line
    assert line["span"] == {"name": "call", "principal": "local"}, line
    listening = await wait_logged(server, lambda ln: "listening on http://" in ln["fields"].get("message", ""), "listening")
    assert listening["level"] == "INFO" and listening["target"] == "wf_host::server::http", listening
    # The console's sign-in link is written beside the log, as JSON too.
    link = await wait_logged(server, lambda ln: ln.get("target") == "wf::console", "the console sign-in link")
    assert "/console/login?token=" in link["fields"]["message"] and link["timestamp"], link


@pytest.mark.anyio
@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_secrets_stay_redacted(wf: Wf, fixture_upstream_bin: Path, fmt: str) -> None:
    # The upstream writes the secret it was given to stderr, which the mcp
    # plugin logs at debug through wf.
    cfg = wf.write_config(
        "[sources.fx]\n"
        'kind = "mcp"\n'
        'command = "sh"\n'
        f'args = ["-c", "echo leaked-$E2E_SECRET >&2; exec {fixture_upstream_bin}"]\n'
        'env = { E2E_SECRET = "${WF_E2E_SECRET}" }\n'
    )
    server = wf.start_http(
        "127.0.0.1",
        None,
        "--log-format",
        fmt,
        "--log-level",
        "debug",
        "--config",
        str(cfg),
        env={"WF_E2E_SECRET": SECRET},
    )
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("fx__echo", {"message": "hi"})
            assert not r.is_error
    if fmt == "json":
        line = await wait_logged(server, lambda ln: "leaked-" in ln["fields"].get("message", ""), "the upstream's stderr")
        assert "leaked-[redacted]" in line["fields"]["message"], line
    else:
        with anyio.fail_after(OP_TIMEOUT):
            while "leaked-" not in server.log.read_text(errors="replace"):
                await anyio.sleep(0.05)
        assert "leaked-[redacted]" in server.log.read_text(errors="replace"), tail(server.log)
        assert not server.log.read_text(errors="replace").lstrip().startswith("{"), tail(server.log)
    assert SECRET not in server.log.read_text(errors="replace"), tail(server.log)


def test_a_bad_log_format_is_a_clear_error(wf: Wf) -> None:
    r = wf.run("--log-format", "yaml", "plugins")
    assert r.returncode != 0
    assert "yaml" in r.stderr and "json" in r.stderr, r.stderr
