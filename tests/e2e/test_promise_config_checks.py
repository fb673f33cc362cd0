"""Small promises of the operator manual that had no test:

- a name in both `mcpServers` and `[sources]` is refused (`wf check` and `wf serve`);
- `wf check` names a source whose kind no loaded plugin serves;
- keys other MCP clients put in `mcpServers` entries (`autoApprove`) are
  accepted and dropped by wf before the plugin sees them, and the source is
  served (test_strict_settings.py has the rest of the strict-settings promises);
- plugins receive the log filter and apply it to their own events before they
  cross the ABI (the host re-logs them under its own target, so only the
  plugin can filter by the plugin's targets);
- `wf runs --limit N` shows the N most recent runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from conftest import Wf, content_text, toml_config
from promise_support import OP_TIMEOUT, wait_log_async

pytestmark = pytest.mark.anyio

IGNORED = "ignoring unknown setting"
# The mcp plugin's own config warning (target wf_source_mcp::config).
HTTP_INHERIT_ENV = "inherit_env only applies to stdio servers"
SESSION_OPEN = "upstream session open"


def test_a_name_in_both_mcp_servers_and_sources_is_refused(wf: Wf, fixture_upstream_bin: Path) -> None:
    fx = {"command": str(fixture_upstream_bin)}
    config = wf.write_config(
        json.dumps({"mcpServers": {"dup": fx, "solo": fx}, "sources": {"dup": {"kind": "mcp", **fx}}}), "wf.json"
    )
    line = 'wf.json: mcpServers.dup: source "dup" is also defined under [sources]'
    checked = wf.run("check", "--config", str(config), *wf.plugin_args()[:2])
    assert checked.returncode == 1 and line in checked.stdout + checked.stderr, (checked.stdout, checked.stderr)
    served = wf.run("serve", "--config", str(config), *wf.plugin_args())
    assert served.returncode != 0 and line in served.stderr, (served.returncode, served.stderr)

    # Control: the same file without the clash is fine.
    config.write_text(json.dumps({"mcpServers": {"dup": fx}, "sources": {"other": {"kind": "mcp", **fx}}}))
    ok = wf.run("check", "--config", str(config), *wf.plugin_args()[:2])
    assert ok.returncode == 0, (ok.stdout, ok.stderr)


def test_check_names_a_source_kind_no_plugin_serves(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(
        toml_config({"odd": {"kind": "nope", "x": 1}, "fx": {"command": str(fixture_upstream_bin)}})
    )
    checked = wf.run("check", "--config", str(config), *wf.plugin_args()[:2], "--log-level", "error")
    lines = (checked.stdout + checked.stderr).splitlines()
    assert checked.returncode == 1, lines
    assert lines == [
        f'{config}: sources.odd.kind: no loaded plugin serves kind "nope" (loaded kinds: mcp, openapi, std, wasm)',
        "wf check: 1 problem(s)",
    ], lines


async def test_auto_approve_is_accepted_and_never_reaches_the_plugin(wf: Wf, fixture_upstream_bin: Path) -> None:
    entry = {"command": str(fixture_upstream_bin), "autoApprove": ["echo"]}
    config = wf.write_config(json.dumps({"mcpServers": {"fx": entry}}), "claude_desktop_config.json")
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool("fx__echo", {"message": "still served"})
        assert not result.is_error and content_text(result.content) == "still served", result
    log = wf.logs[-1].read_text()
    # Were it passed on, the mcp plugin would warn about a key it does not read.
    assert IGNORED not in log, log[-3000:]


@pytest.mark.parametrize(
    ("level", "shown"), [("debug", True), ("debug,wf_source_mcp::config=error", False)], ids=["debug", "config=error"]
)
async def test_plugins_apply_the_log_filter_to_their_own_targets(
    wf: Wf, fixture_upstream_bin: Path, level: str, shown: bool
) -> None:
    """The mcp plugin warns about `inherit_env` on an HTTP source (target
    wf_source_mcp::config) when it creates the source, and later logs the
    session it opens for the stdio one (target
    wf_source_mcp::runtime, info). Filtering out the first target must drop the
    warning and keep the rest of the plugin's log."""
    config = wf.write_config(
        toml_config(
            {
                "fx": {"command": str(fixture_upstream_bin)},
                "remote": {"url": "http://127.0.0.1:9/mcp", "inherit_env": True},
            }
        )
    )
    async with wf.stdio_client("auto", "--config", str(config), "--log-level", level) as c:
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool("fx__echo", {"message": "hi"})
        assert not result.is_error, result
        log = await wait_log_async(wf.logs[-1], SESSION_OPEN, "the plugin logs the session it opened")
    # The plugin's debug events of other targets cross (the host shows debug), its
    # config warning crosses only when the filter lets its target through.
    lines = log.splitlines()
    assert any(line.split()[1:3] == ["DEBUG", "wf::plugin:"] for line in lines), "no plugin debug line"
    assert any(HTTP_INHERIT_ENV in line for line in lines) is shown, [line for line in lines if "wf::plugin" in line][:20]


def test_runs_limit_shows_the_most_recent_runs(wf: Wf) -> None:
    for name in ("first", "second", "third"):
        path = wf.root / f"{name}.json"
        path.write_text(json.dumps({"name": name, "nodes": [{"id": "c", "use": "wf.std.const", "args": {"value": 1}}]}))
        ran = wf.run("run", str(path), *wf.plugin_args(), "--log-level", "error")
        assert ran.returncode == 0, ran.stderr

    def runs(*extra: str) -> list[str]:
        listed = wf.run("runs", "--state-dir", str(wf.state_dir), "--json", *extra)
        assert listed.returncode == 0, listed.stderr
        return [r["workflow"] for r in json.loads(listed.stdout)]

    assert runs() == ["third", "second", "first"]
    assert runs("--limit", "2") == ["third", "second"]
    assert runs("--limit", "1") == ["third"]
    table = wf.run("runs", "--state-dir", str(wf.state_dir), "--limit", "2")
    rows = table.stdout.splitlines()[1:]
    assert table.returncode == 0 and len(rows) == 2 and "third" in rows[0] and "second" in rows[1], table.stdout
