"""The admin surface (`wf_admin__*` tools) and the `wf source` CLI, end to end.

- Staged edits (add/update/remove/enable/disable, by admin tool over stdio and by
  `wf source ...`) rewrite the TOML config keeping the operator's comments, refuse
  edits that would leave an invalid file (writing nothing), and the running
  `wf serve` applies them (reload tool, or its file watcher).
- Access: over stdio always; over HTTP per `[admin]` (off by default, a token in
  `X-Wf-Admin-Token`, or open); `enabled = false` removes the tools. Secrets given
  as `${VAR}` never show in admin output nor in wf's log.
- list_plugins (loaded, refused, files needing a restart), plugin files dropped into
  a plugin folder and loaded by reload, refresh_catalog for one source or all.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
import uuid
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from admin_support import (
    ADMIN_TOKEN_HEADER,
    ADMIN_TOOLS,
    FX_TOOLS,
    OP_TIMEOUT,
    admin,
    admin_outcome,
    http_client_with_headers,
    result_text,
    source_tools,
    sources_by_name,
    structured,
    tool_names,
    wait_for,
    wait_tools,
    write_atomic,
)
from conftest import UpstreamEvents, Wf, call_outcome, content_text, free_port, toml_config

pytestmark = pytest.mark.anyio


def commented_config(fixture_upstream_bin: Path) -> str:
    """An operator's config file, with comments in every place TOML allows them."""
    return f"""\
# Team wf config: keep this header comment
[server]
page_size = 100 # items per page (keep me)

# the stateful fixture (keep me)
[sources.fx]
command = "{fixture_upstream_bin}" # the fixture binary (keep me)
args = [] # no arguments yet (keep me)

# a source that will be removed
[sources.old]
command = "{fixture_upstream_bin}"

# the admin tools may add command sources (keep me)
[admin]
allow_process_sources = true
"""


KEPT_COMMENTS = [
    "# Team wf config: keep this header comment",
    "# items per page (keep me)",
    "# the stateful fixture (keep me)",
    "# the fixture binary (keep me)",
    "# no arguments yet (keep me)",
]


def assert_comments_kept(config: Path) -> None:
    text = config.read_text()
    lost = [c for c in KEPT_COMMENTS if c not in text]
    assert not lost, f"comments lost: {lost}\n{text}"


def sources_in(config: Path) -> dict[str, Any]:
    return tomllib.loads(config.read_text()).get("sources", {})


# --------------------------------------------------------------------------- 5. staged edits


async def test_admin_staged_edits_round_trip_the_toml_file(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(commented_config(fixture_upstream_bin))
    file = str(config.resolve())
    fx_bin = str(fixture_upstream_bin)

    async with wf.stdio_client("auto", "--config", str(config)) as c:
        names = await tool_names(c)
        assert source_tools(names, "fx") == FX_TOOLS and source_tools(names, "old") == FX_TOOLS

        staged = await admin(c, "add_source", {"name": "fy", "config": {"command": fx_bin}})
        assert staged["staged"] is True and staged["requires_reload"] is True and staged["file"] == file, staged
        staged = await admin(
            c,
            "update_source",
            {"name": "fx", "config": {"command": fx_bin, "args": ["--start-delay-ms", "0"], "env": {"E2E": "1"}}},
        )
        assert staged["requires_reload"] is True, staged
        staged = await admin(c, "remove_source", {"name": "old"})
        assert staged["requires_reload"] is True, staged

        # Edits that would leave a wrong file are refused, and nothing is written.
        before = config.read_bytes()
        for tool, args, expect in [
            (
                "add_source",
                {"name": "fy", "config": {"command": fx_bin}},
                f"{file}: sources.fy: a source of that name already exists",
            ),
            ("update_source", {"name": "nope", "config": {"command": fx_bin}}, f"{file}: sources.nope: no such source"),
            ("remove_source", {"name": "nope"}, f"{file}: sources.nope: no such source"),
            ("disable_source", {"name": "nope"}, f"{file}: sources.nope: no such source"),
            ("add_source", {"name": "bad__name", "config": {"command": fx_bin}}, "'__' is reserved"),
            (
                "update_source",
                {"name": "fx", "config": {"command": fx_bin, "enabled": "yes"}},
                f"{file}: sources.fx.enabled: ",
            ),
            ("add_source", {"name": "fz"}, "needs `name` and a `config` object"),
        ]:
            failed, value = await admin_outcome(c, tool, args)
            assert failed, (tool, args, value)
            assert expect in value["error"], (tool, args, value)
            assert config.read_bytes() == before, f"a refused {tool} changed the file"

        # The file: comments kept, values updated, the removed source gone.
        assert_comments_kept(config)
        assert "# a source that will be removed" not in config.read_text()
        sources = sources_in(config)
        assert set(sources) == {"fx", "fy"}, sources
        assert sources["fx"] == {"command": fx_bin, "args": ["--start-delay-ms", "0"], "env": {"E2E": "1"}}
        assert sources["fy"] == {"command": fx_bin}
        assert tomllib.loads(config.read_text())["server"] == {"page_size": 100}

        # Applied by the reload tool (or the watcher, whichever comes first).
        outcome = await admin(c, "reload")
        assert outcome["error"] is None, outcome
        names = await wait_tools(
            c, lambda n: source_tools(n, "fy") == FX_TOOLS and not source_tools(n, "old"), "the staged edits applied"
        )
        assert source_tools(names, "fx") == FX_TOOLS
        rows = await sources_by_name(c)
        assert set(rows) == {"fx", "fy", "wf.std"}, rows
        assert rows["fx"]["runtime"]["upstream"]["env_keys"] == ["E2E"], rows["fx"]

        # disable / enable: staged too; a disabled source serves nothing.
        await admin(c, "disable_source", {"name": "fy"})
        assert sources_in(config)["fy"]["enabled"] is False
        assert (await admin(c, "reload"))["error"] is None
        await wait_tools(c, lambda n: not source_tools(n, "fy"), "fy disabled")
        row = (await sources_by_name(c))["fy"]
        assert row["enabled"] is False and row["state"] == "disabled", row
        _, error = await call_outcome(c, "fy__echo", {"message": "x"})
        assert error == 'unknown tool "fy__echo"', error

        await admin(c, "enable_source", {"name": "fy"})
        assert sources_in(config)["fy"]["enabled"] is True
        assert (await admin(c, "reload"))["error"] is None
        await wait_tools(c, lambda n: source_tools(n, "fy") == FX_TOOLS, "fy enabled again")
        assert (await structured(c, "fy__increment")) == {"count": 1}
        assert_comments_kept(config)


async def test_admin_staged_edit_without_a_config_file_is_refused(wf: Wf) -> None:
    async with wf.stdio_client("auto") as c:
        failed, value = await admin_outcome(c, "add_source", {"name": "x", "config": {"url": "http://127.0.0.1:1/mcp"}})
    assert failed
    assert "without --config" in value["error"], value


async def cli(wf: Wf, *args: str) -> Any:
    """`wf <args>` in a worker thread (the client's event loop keeps running)."""
    return await anyio.to_thread.run_sync(lambda: wf.run(*args))


async def test_cli_source_edits_round_trip_and_a_running_server_applies_them(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    config = wf.write_config(commented_config(fixture_upstream_bin))
    fx_bin = str(fixture_upstream_bin)
    cfg = ["--config", str(config)]

    async with wf.stdio_client("auto", *cfg) as c:
        assert source_tools(await tool_names(c), "fz") == set()
        old_fx_pid = (await structured(c, "fx__pid"))["pid"]

        done = await cli(wf, "source", "add", "fz", *cfg, "--set", f"command={fx_bin}", "--set", "args=[]")
        assert done.returncode == 0, done.stderr
        assert "updated" in done.stdout, done.stdout
        await wait_tools(c, lambda n: source_tools(n, "fz") == FX_TOOLS, "`wf source add` applied by the watcher")

        done = await cli(
            wf, "source", "update", "fx", *cfg, "--json",
            json.dumps({"command": fx_bin, "args": [], "env": {"E2E": "2"}}),
        )
        assert done.returncode == 0, done.stderr
        await wait_for(
            lambda: sources_by_name(c),
            lambda r: r["fx"]["runtime"]["upstream"]["env_keys"] == ["E2E"],
            "`wf source update` applied by the watcher",
        )
        assert (await structured(c, "fx__pid"))["pid"] != old_fx_pid, "the updated source kept its old upstream"

        done = await cli(wf, "source", "disable", "fz", *cfg)
        assert done.returncode == 0, done.stderr
        await wait_tools(c, lambda n: not source_tools(n, "fz"), "`wf source disable` applied by the watcher")
        done = await cli(wf, "source", "enable", "fz", *cfg)
        assert done.returncode == 0, done.stderr
        await wait_tools(c, lambda n: source_tools(n, "fz") == FX_TOOLS, "`wf source enable` applied by the watcher")

        done = await cli(wf, "source", "remove", "old", *cfg)
        assert done.returncode == 0, done.stderr
        await wait_tools(c, lambda n: not source_tools(n, "old"), "`wf source remove` applied by the watcher")

        # Refused edits: exit 1, `file: key: reason` on stderr, the file untouched.
        before = config.read_bytes()
        file = str(config.resolve())
        for args, expect in [
            (["add", "fx", "--set", f"command={fx_bin}"], f"{file}: sources.fx: a source of that name already exists"),
            (["remove", "nope"], f"{file}: sources.nope: no such source"),
            (["update", "fx", "--set", f"command={fx_bin}", "--set", "enabled=yes"], f"{file}: sources.fx.enabled: "),
            (["add", "a__b", "--set", "command=x"], "'__' is reserved"),
        ]:
            done = await cli(wf, "source", *args, *cfg)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert expect in done.stderr, (args, done.stderr)
            assert config.read_bytes() == before, f"a refused `wf source {args[0]}` changed the file"
        done = await cli(wf, "source", "add", "x", "--set", "command=x")
        assert done.returncode != 0 and "--config FILE is required" in done.stderr, done.stderr

        assert (await structured(c, "fz__increment")) == {"count": 1}

    assert_comments_kept(config)
    sources = sources_in(config)
    assert set(sources) == {"fx", "fz"}, sources
    assert sources["fx"] == {"command": fx_bin, "args": [], "env": {"E2E": "2"}}
    assert sources["fz"] == {"command": fx_bin, "args": [], "enabled": True}

    listed = wf.run("sources", *cfg, *wf.plugin_args(), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"fx", "fz", "wf.std"}, rows
    assert rows["fx"]["settings"] == ["args", "command", "env"] and rows["fx"]["default"] is False, rows["fx"]
    assert rows["wf.std"]["default"] is True and rows["wf.std"]["plugin"] == "wf-source-std"
    table = wf.run("sources", *cfg)
    assert table.returncode == 0 and "fz" in table.stdout and "old" not in table.stdout, table.stdout


def test_update_keeps_comments_of_a_sub_table(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(
        f"""\
[sources.fx]
command = "{fixture_upstream_bin}"

# env for fx (keep me)
[sources.fx.env]
A = "1" # first value (keep me)
"""
    )
    done = wf.run(
        "source", "update", "fx", "--config", str(config),
        "--json", json.dumps({"command": str(fixture_upstream_bin), "env": {"A": "2"}}),
    )
    assert done.returncode == 0, done.stderr
    assert sources_in(config)["fx"]["env"] == {"A": "2"}
    text = config.read_text()
    assert "# env for fx (keep me)" in text and "# first value (keep me)" in text, text


# --------------------------------------------------------------------------- 6. access


async def test_admin_disabled_removes_the_tools(wf: Wf) -> None:
    config = wf.write_config("[admin]\nenabled = false\n")
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        names = await tool_names(c)
        assert not [n for n in names if n.startswith("wf_admin__")], sorted(names)
        assert "wf_std__const" in names
        _, error = await call_outcome(c, "wf_admin__status")
        assert error is not None and "unknown tool" in error, error
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server, "auto") as c:
        assert not [n for n in await tool_names(c) if n.startswith("wf_admin__")]


async def test_admin_over_stdio_is_allowed_by_default(wf: Wf) -> None:
    async with wf.stdio_client("auto") as c:
        names = await tool_names(c)
        assert {n for n in names if n.startswith("wf_admin__")} == {f"wf_admin__{t}" for t in ADMIN_TOOLS}
        status = await admin(c, "status")
    assert status["config_file"] == "<embedded default>"
    assert status["counts"]["plugins"] == 4 and status["last_reload"] is None, status


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_admin_over_http_is_refused_by_default(wf: Wf, mode: str) -> None:
    server = wf.start_http()
    async with wf.http_client(server, mode) as c:
        for tool in ("status", "list_sources", "reload"):
            failed, value = await admin_outcome(c, tool)
            assert failed, (tool, value)
            assert "refused" in value["error"] and "stdio" in value["error"], value
        # Everything else is served as usual.
        assert (await structured(c, "wf_std__const", {"value": 1})) == {"value": 1}


ADMIN_TOKEN_ENV = "E2E_ADMIN_TOKEN"
TOKEN_CONFIGS = {
    "explicit-token-mode": f'[admin]\nover_http = "token"\ntoken = "${{{ADMIN_TOKEN_ENV}}}"\n',
    "token-implies-token-mode": f'[admin]\ntoken = "${{{ADMIN_TOKEN_ENV}}}"\n',
}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("admin_config", list(TOKEN_CONFIGS), ids=list(TOKEN_CONFIGS))
async def test_admin_over_http_with_a_token(wf: Wf, admin_config: str, mode: str) -> None:
    token = f"adm-{uuid.uuid4().hex}"
    config = wf.write_config(TOKEN_CONFIGS[admin_config])
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env={ADMIN_TOKEN_ENV: token})

    async with wf.http_client(server, mode) as c:
        failed, value = await admin_outcome(c, "status")
        assert failed, value
        assert "token" in value["error"] and ADMIN_TOKEN_HEADER in value["hint"], value
    for wrong in ("wrong", token.upper(), token + "x", ""):
        async with http_client_with_headers(server.url, {ADMIN_TOKEN_HEADER: wrong}, mode) as c:
            failed, value = await admin_outcome(c, "list_sources")
            assert failed, (wrong, value)
            assert "token" in value["error"], value
    async with http_client_with_headers(server.url, {ADMIN_TOKEN_HEADER: token}, mode) as c:
        status = await admin(c, "status")
        assert status["config_file"] == str(config.resolve())
        assert {r["name"] for r in (await admin(c, "list_sources"))["sources"]} == {"wf.std"}
        assert token not in json.dumps(status)


async def test_admin_over_http_open(wf: Wf) -> None:
    config = wf.write_config('[admin]\nover_http = "open"\n')
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server, "auto") as c:
        assert (await admin(c, "status"))["counts"]["sources"] == 1


@pytest.mark.parametrize(
    "admin_config",
    [
        f'over_http = "token"\ntoken = "${{E2E_UNSET_{uuid.uuid4().hex[:8]}}}"',  # its variable is not set
        'over_http = "token"',  # no token at all
    ],
    ids=["unset-variable", "no-token"],
)
async def test_admin_token_mode_fails_closed(wf: Wf, admin_config: str) -> None:
    config = wf.write_config(f"[admin]\n{admin_config}\n")
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    for header in ("", "${E2E_UNSET}", "undefined"):
        async with http_client_with_headers(server.url, {ADMIN_TOKEN_HEADER: header}) as c:
            failed, value = await admin_outcome(c, "status")
            assert failed and "token" in value["error"], (header, value)


SECRET_ENV = "SECRET_VALUE"


async def every_admin_output(c: Client) -> list[str]:
    """The text and structured content of every read-only admin tool, plus a reload."""
    out = []
    for tool, args in [
        ("status", {}),
        ("list_sources", {}),
        ("list_plugins", {}),
        ("refresh_catalog", {}),
        ("refresh_catalog", {"source": "fx"}),
        ("reload", {}),
        ("list_sources", {}),
        ("status", {}),
    ]:
        with anyio.fail_after(OP_TIMEOUT):
            result = await c.call_tool(f"wf_admin__{tool}", args)
        out.append(f"{tool}: {result_text(result)}")
    return out


async def test_secrets_never_show_in_admin_output_or_logs(wf: Wf, fixture_upstream_bin: Path) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    token = f"adm-{uuid.uuid4().hex}"
    dead_port = free_port()
    config = wf.write_config(
        f'[admin]\ntoken = "${{{ADMIN_TOKEN_ENV}}}"\n\n'
        + toml_config(
            {
                "fx": {"command": str(fixture_upstream_bin), "env": {"TOKEN": f"${{{SECRET_ENV}}}"}},
                "auth": {"command": str(fixture_upstream_bin), "auth": {"env": {"API_KEY": f"${{{SECRET_ENV}}}"}}},
                # An HTTP upstream that is not there: its errors must not carry the headers either.
                "web": {
                    "url": f"http://127.0.0.1:{dead_port}/mcp",
                    "headers": {"X-Api-Key": f"${{{SECRET_ENV}}}"},
                    "auth": {"bearer_token": f"${{{SECRET_ENV}}}"},
                },
            }
        )
    )
    server = wf.start_http(
        "127.0.0.1", None, "--config", str(config), env={SECRET_ENV: secret, ADMIN_TOKEN_ENV: token}
    )
    async with http_client_with_headers(server.url, {ADMIN_TOKEN_HEADER: token}, "legacy") as c:
        # The sources run (with the secret in their environment).
        assert (await structured(c, "fx__increment")) == {"count": 1}
        outputs = await every_admin_output(c)
        # Staged edits referencing the secret by name.
        outputs.append(
            result_text(
                await c.call_tool(
                    "wf_admin__add_source",
                    {
                        "name": "more",
                        "config": {"command": str(fixture_upstream_bin), "env": {"K": f"${{{SECRET_ENV}}}"}},
                    },
                )
            )
        )
        outputs += await every_admin_output(c)
        rows = await sources_by_name(c)
    server.stop()

    assert rows["fx"]["runtime"]["upstream"]["env_keys"] == ["TOKEN"], rows["fx"]
    assert rows["auth"]["runtime"]["upstream"]["env_keys"] == ["API_KEY"], rows["auth"]
    assert rows["web"]["runtime"]["upstream"]["header_names"] == ["X-Api-Key"], rows["web"]
    assert rows["web"]["state"] == "failed", rows["web"]
    for out in outputs:
        assert secret not in out, f"the secret shows in admin output: {out}"
        assert token not in out, f"the admin token shows in admin output: {out}"
    log = server.log.read_text()
    assert secret not in log, "the secret shows in wf's log"
    assert token not in log, "the admin token shows in wf's log"
    listed = wf.run("sources", "--config", str(config), "--json", env={SECRET_ENV: secret})
    assert listed.returncode == 0 and secret not in listed.stdout + listed.stderr


async def _secret_in_admin_output(wf: Wf, table: dict[str, Any], secret: str) -> tuple[list[str], list[str]]:
    """Serves source `leaky` (`table`, which names ${SECRET_VALUE}) with SECRET_VALUE=`secret`.
    Once it is discovered (ready), returns every admin output and wf's log that show the
    secret, and the command line of the upstream's process (/proc/PID/cmdline)."""
    config = wf.write_config(toml_config({"leaky": table}))
    async with wf.stdio_client("auto", "--config", str(config), env={SECRET_ENV: secret}) as c:
        rows = await wait_for(lambda: sources_by_name(c), lambda r: r["leaky"]["state"] != "pending", "discovery")
        # Discovery worked: the reference was expanded into a working upstream setting.
        assert rows["leaky"]["state"] == "ready", rows["leaky"]
        outputs = await every_admin_output_of(c, "leaky")
        # The running source too (a persistent runtime, started by this call).
        pid = (await structured(c, "leaky__pid"))["pid"]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        outputs += await every_admin_output_of(c, "leaky")
        log = wf.logs[-1].read_text()
        return [o for o in [*outputs, log] if secret in o], argv


async def every_admin_output_of(c: Client, source: str) -> list[str]:
    out = []
    for tool, args in [("list_sources", {}), ("refresh_catalog", {"source": source}), ("status", {})]:
        with anyio.fail_after(OP_TIMEOUT):
            out.append(f"{tool}: {result_text(await c.call_tool(f'wf_admin__{tool}', args))}")
    return out


async def test_secret_in_args_never_shows_in_admin_output(wf: Wf, fixture_upstream_bin: Path) -> None:
    """The secret reaches the upstream expanded (its process table entry, seen from
    outside, has it as an argument), yet no admin output or log shows it."""
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    table = {"command": str(fixture_upstream_bin), "args": ["--api-key", f"${{{SECRET_ENV}}}"]}
    leaks, argv = await _secret_in_admin_output(wf, table, secret)
    assert not leaks, "\n".join(leaks)
    assert argv[1:3] == ["--api-key", secret], argv


async def test_secret_in_url_never_shows_in_admin_output(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """A live HTTP upstream receives the expanded secret in its URL (the fixture records
    each request's URI), yet no admin output or log shows it."""
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    port = free_port()
    argv = [str(fixture_upstream_bin), "--http", f"127.0.0.1:{port}", *upstream_events.args()]
    wf.start_upstream_http("fixture-http", argv, port)
    leaks, _ = await _secret_in_admin_output(wf, {"url": f"http://127.0.0.1:{port}/mcp?key=${{{SECRET_ENV}}}"}, secret)
    assert not leaks, "\n".join(leaks)
    uris = {e["uri"] for e in upstream_events.read() if e["event"] == "http"}
    assert uris and uris == {f"/mcp?key={secret}"}, uris


# --------------------------------------------------------------------------- 7. plugins and catalogs


async def test_list_plugins_shows_loaded_and_refused(wf: Wf, plain_c_lib: Path) -> None:
    wf.install("bad-version")
    wf.install_file(plain_c_lib)
    async with wf.stdio_client("auto") as c:
        plugins = await admin(c, "list_plugins")
        status = await admin(c, "status")
    loaded = {p["name"]: p for p in plugins["loaded"]}
    assert set(loaded) == {"wf-source-std", "wf-source-mcp", "wf-source-openapi", "wf-source-wasm"}, loaded
    assert loaded["wf-source-std"]["kinds"] == ["std"] and loaded["wf-source-mcp"]["kinds"] == ["mcp"]
    assert loaded["wf-source-openapi"]["kinds"] == ["openapi"]
    for p in loaded.values():
        assert Path(p["file"]).is_file() and p["api_version"] and p["version"], p
    refused = {Path(r["file"]).name: r["reason"] for r in plugins["refused"]}
    assert set(refused) == {"libfixture_bad_version.so", plain_c_lib.name}, refused
    assert refused["libfixture_bad_version.so"].startswith("incompatible wf-plugin-api: built against 2.0.0"), refused
    assert refused[plain_c_lib.name].startswith("not a wf plugin"), refused
    assert plugins["supported_api"] and plugins["restart_needed"] == []
    assert status["counts"]["plugins"] == 4 and status["counts"]["refused_plugin_files"] == 2, status


async def test_plugin_dropped_into_a_folder_is_loaded_by_reload(wf: Wf) -> None:
    async with wf.stdio_client("auto") as c:
        assert source_tools(await tool_names(c), "panicky") == set()
        dropped = wf.install("call-panics")

        outcome = await admin(c, "reload")
        assert outcome["error"] is None, outcome
        assert outcome["plugins_loaded"] == ["fixture-call-panics"], outcome
        assert outcome["sources"]["added"] == ["panicky"], outcome

        plugins = await admin(c, "list_plugins")
        loaded = {p["name"]: p for p in plugins["loaded"]}
        assert set(loaded) == {"wf-source-std", "wf-source-mcp", "wf-source-openapi", "wf-source-wasm", "fixture-call-panics"}, loaded
        assert loaded["fixture-call-panics"]["kinds"] == ["panicky"]
        assert Path(loaded["fixture-call-panics"]["file"]) == dropped
        row = (await sources_by_name(c))["panicky"]
        assert row["plugin"] == "fixture-call-panics" and row["kind"] == "panicky", row
        names = await wait_tools(c, lambda n: source_tools(n, "panicky") == {"ok", "panic"}, "the new plugin's tools")
        assert "wf_std__const" in names
        result = await c.call_tool("panicky__ok", {})
        assert content_text(result.content) == "still here"

        # A loaded plugin file that changes on disk needs a restart, and wf says so.
        later = time.time() + 60
        os.utime(dropped, (later, later))
        for where in ((await admin(c, "list_plugins"))["restart_needed"], (await admin(c, "status"))["restart_needed"]):
            assert len(where) == 1 and str(dropped) in where[0] and "restart" in where[0], where
        outcome = await admin(c, "reload")
        assert outcome["plugins_loaded"] == [] and len(outcome["restart_needed"]) == 1, outcome


async def test_refused_plugin_file_replaced_by_a_good_one_is_loaded_by_reload(wf: Wf) -> None:
    target = wf.install("bad-version", as_name="libdropin.so")
    async with wf.stdio_client("auto") as c:
        refused = (await admin(c, "list_plugins"))["refused"]
        assert [Path(r["file"]).name for r in refused] == ["libdropin.so"], refused
        # The operator replaces the broken build with a good one (a new file, renamed over it).
        tmp = wf.plugin_dir / "dropin.tmp"
        tmp.write_bytes(wf.fixture_lib("call-panics").read_bytes())
        os.replace(tmp, target)
        outcome = await admin(c, "reload")
        plugins = await admin(c, "list_plugins")
    still_refused = [r for r in plugins["refused"] if Path(r["file"]) == target]
    assert outcome["plugins_loaded"] == ["fixture-call-panics"], f"reload: {outcome}; refused: {still_refused}"
    assert still_refused == []
    loaded = {p["name"]: Path(p["file"]) for p in plugins["loaded"]}
    assert loaded["fixture-call-panics"] == target, loaded


def write_script(path: Path, body: str) -> None:
    write_atomic(path, f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


async def test_refresh_catalog_one_and_all(wf: Wf, fixture_upstream_bin: Path) -> None:
    """`up`'s command is a script; rewriting it to start a different server (a nested
    `wf serve`) changes the upstream's tools without changing the config."""
    script = wf.root / "up.sh"
    write_script(script, f'exec "{fixture_upstream_bin}"')
    inner_state = wf.root / "inner-state"
    inner_plugins = wf.root / "inner-plugins"
    inner_plugins.mkdir()
    config = wf.write_config(toml_config({"up": {"command": str(script)}}))
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    async with wf.stdio_client("legacy", "--config", str(config), message_handler=handler) as c:
        assert source_tools(await tool_names(c), "up") == FX_TOOLS
        rows = await sources_by_name(c)
        first_discovery = rows["up"]["last_discovery_at"]

        one = await admin(c, "refresh_catalog", {"source": "up"})
        assert len(one["refreshed"]) == 1, one
        r = one["refreshed"][0]
        assert r["source"] == "up" and r["state"] == "ready" and r["changed"] is False and r["error"] is None, r
        assert isinstance(r["discovery_ms"], int)
        assert (await sources_by_name(c))["up"]["last_discovery_at"] > first_discovery

        every = await admin(c, "refresh_catalog", {})
        assert {r["source"] for r in every["refreshed"]} == {"up", "wf.std"}, every
        assert all(r["state"] == "ready" and r["changed"] is False for r in every["refreshed"]), every

        failed, value = await admin_outcome(c, "refresh_catalog", {"source": "nope"})
        assert failed and value["error"] == 'no source "nope"', value

        # The upstream changes behind wf's back; a refresh notices, and clients are told.
        write_script(
            script, f'exec "{wf.bin}" serve --plugins "{inner_plugins}" --state-dir "{inner_state}"'
        )
        await anyio.sleep(0.3)  # let any notification of the start settle
        seen = len(notes)
        one = await admin(c, "refresh_catalog", {"source": "up"})
        r = one["refreshed"][0]
        assert r["changed"] is True and r["state"] == "ready", r

        async def tools_changed_since() -> list[Any]:
            return [n for n in notes[seen:] if isinstance(n, types.ToolListChangedNotification)]

        await wait_for(tools_changed_since, bool, "tools/list_changed after a refresh changed the catalog")
        names = await tool_names(c)
        assert source_tools(names, "up") >= {"wf_std__const", "wf_admin__status"}, sorted(names)
        assert not source_tools(names, "up") & FX_TOOLS
        assert (await structured(c, "up__wf_std__const", {"value": 7})) == {"value": 7}
        rows = await sources_by_name(c)
        assert rows["up"]["capabilities"]["tools"] == len(source_tools(names, "up")), rows["up"]


async def test_an_older_discovery_never_overwrites_a_newer_refresh(wf: Wf, fixture_upstream_bin: Path) -> None:
    """The start-up discovery meets an upstream held at a gate (a script that waits for
    a file, then serves other tools: a nested `wf serve`). Meanwhile the upstream is
    replaced by the fixture and a refresh applies its tools. When the gate opens, the
    start-up discovery finishes with the old tools, and must not replace the newer
    catalog. Its end is an event in wf's log ("discovered" or, today, "dropping a
    discovery result older than the one applied"), so no timing is involved."""
    script = wf.root / "up.sh"
    started, gate = wf.root / "up-started", wf.root / "up-gate"
    inner_plugins, inner_state = wf.root / "inner-plugins", wf.root / "inner-state"
    inner_plugins.mkdir()
    write_script(
        script,
        f'touch "{started}"\nwhile [ ! -e "{gate}" ]; do sleep 0.05; done\n'
        f'exec "{wf.bin}" serve --plugins "{inner_plugins}" --state-dir "{inner_state}"',
    )
    config = wf.write_config(
        toml_config(
            {"up": {"command": str(script), "connect_timeout_ms": 300_000}},
            server={"startup_grace_ms": 0, "discovery_timeout_ms": 300_000},
        )
    )
    log_filter = "info,rmcp=warn,wf_host::sources::registry=debug"
    async with wf.stdio_client("auto", "--config", str(config), env={"WF_LOG": log_filter}) as c:
        log = wf.logs[-1]

        def discoveries_of_up() -> list[str]:
            ends = ("discovered", "dropping a discovery result", "discovery failed")
            return [line for line in log.read_text().splitlines() if "source=up" in line and any(e in line for e in ends)]

        with anyio.fail_after(OP_TIMEOUT * 2):
            while not started.exists():  # the start-up discovery is at the gate
                await anyio.sleep(0.05)
            assert source_tools(await tool_names(c), "up") == set()
            # Meanwhile the upstream is replaced by the fixture; a refresh sees it at once.
            write_script(script, f'exec "{fixture_upstream_bin}"')
            r = (await admin(c, "refresh_catalog", {"source": "up"}))["refreshed"][0]
            assert r["changed"] is True and r["state"] == "ready", r
            assert source_tools(await tool_names(c), "up") == FX_TOOLS
            assert len(discoveries_of_up()) == 1, discoveries_of_up()

            # Then the start-up discovery finishes, with the nested wf's tools.
            gate.touch()

        async def ended() -> list[str]:
            return discoveries_of_up()

        seen = await wait_for(ended, lambda lines: len(lines) == 2, "the start-up discovery to end", timeout=60)
        assert "discovery failed" not in seen[1], seen
        assert source_tools(await tool_names(c), "up") == FX_TOOLS, f"a stale discovery replaced the refreshed catalog: {seen}"
