"""Configuring `mcp` sources: Claude Desktop's `mcpServers` JSON as it is, the
example configs, `${VAR}` expansion (and that the values stay out of logs), and
the allow/deny lists that decide which upstream tools a client sees and can call.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import REPO, Wf, all_tools, call_outcome, content_text, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
EXAMPLES = sorted((REPO / "examples" / "configs").iterdir())
FX_TOOLS = {"echo", "increment", "get_count", "slow", "progress", "crash", "pid"}


def path_with(bin_dir: Path) -> dict[str, str]:
    """PATH with `bin_dir` first (so configs may name `mcp-server-everything` bare)."""
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def source_tools(tools: list[Any], source: str) -> set[str]:
    prefix = f"{source}__"
    return {t.name[len(prefix) :] for t in tools if t.name.startswith(prefix)}


def get_env_json(result: Any) -> dict[str, str]:
    """server-everything's get-env answers with the JSON of its process environment."""
    assert not result.is_error, content_text(result.content)
    return json.loads(content_text(result.content))


# --------------------------------------------------------------------------- Claude Desktop


async def test_claude_desktop_mcp_servers_json(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(
        json.dumps(
            {
                "mcpServers": {
                    "fx": {"command": str(fixture_upstream_bin), "args": []},
                    "off": {"command": str(fixture_upstream_bin), "args": [], "disabled": True},
                }
            },
            indent=2,
        ),
        name="claude_desktop_config.json",
    )
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = await all_tools(c)
            assert source_tools(tools, "fx") == FX_TOOLS
            assert source_tools(tools, "off") == set(), "a disabled mcpServers entry is served"
            counts = [(await c.call_tool("fx__increment", {})).structured_content for _ in range(2)]
            assert counts == [{"count": 1}, {"count": 2}]
            _, error = await call_outcome(c, "off__echo", {"message": "x"})
            assert error == 'unknown tool "off__echo"', error


# --------------------------------------------------------------------------- examples/configs


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_config_checks(wf: Wf, everything_bin: Path, example: Path) -> None:
    proc = wf.run("check", "--config", str(example), env=path_with(everything_bin.parent))
    assert proc.returncode == 0, f"wf check --config {example.name} exited {proc.returncode}:\n{proc.stderr}"
    assert proc.stdout.startswith("ok:"), proc.stdout


async def test_example_wf_toml_serves_everything_without_denied_tools(wf: Wf, everything_bin: Path) -> None:
    example = REPO / "examples" / "configs" / "wf.toml"
    async with wf.client("stdio", "auto", "--config", str(example), env=path_with(everything_bin.parent)) as c:
        await wait_listed(c, "everything__echo")
        with anyio.fail_after(OP_TIMEOUT):
            tools = source_tools(await all_tools(c), "everything")
            assert "echo" in tools and "get-sum" in tools, sorted(tools)
            assert "get-env" not in tools, "deny_tools = [\"get-env\"] is listed"
            echoed = await c.call_tool("everything__echo", {"message": "from the example"})
            assert "from the example" in content_text(echoed.content)
            _, error = await call_outcome(c, "everything__get-env")
            assert error == 'unknown tool "everything__get-env"', "a denied tool can be called: " + str(error)


async def test_example_claude_desktop_json_passes_env(wf: Wf, everything_bin: Path) -> None:
    example = REPO / "examples" / "configs" / "claude-desktop.json"
    async with wf.client("stdio", "auto", "--config", str(example), env=path_with(everything_bin.parent)) as c:
        await wait_listed(c, "everything__echo")
        with anyio.fail_after(OP_TIMEOUT):
            tools = source_tools(await all_tools(c), "everything")
            assert {"echo", "get-env"} <= tools, sorted(tools)
            env = get_env_json(await c.call_tool("everything__get-env", {}))
    assert env.get("EXAMPLE_SETTING") == "1", sorted(env)


# --------------------------------------------------------------------------- ${VAR}


def secret_config(wf: Wf, everything_bin: Path, var: str) -> Path:
    return wf.write_config(
        toml_config({"ev": {"command": str(everything_bin), "env": {"WF_TEST_SECRET": f"${{{var}}}"}}})
    )


async def test_env_var_reaches_the_upstream_and_never_the_log(wf: Wf, everything_bin: Path) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    config = secret_config(wf, everything_bin, "WF_TEST_VALUE")
    client = wf.stdio_client("auto", "--config", str(config), env={"WF_TEST_VALUE": secret})
    log = wf.logs[-1]
    async with client as c:
        await wait_listed(c, "ev__get-env")
        with anyio.fail_after(OP_TIMEOUT):
            env = get_env_json(await c.call_tool("ev__get-env", {}))
    assert env.get("WF_TEST_SECRET") == secret, "the expanded ${WF_TEST_VALUE} did not reach the upstream"
    text = log.read_text(errors="replace")
    assert "discovered" in text, f"unexpected wf log:\n{text}"
    assert secret not in text, "the secret appears in wf's log"


async def test_env_var_value_stays_out_of_the_debug_log(wf: Wf, everything_bin: Path) -> None:
    """Even at debug level (which logs protocol traffic and upstream stderr), wf never
    logs a config value: the source is created, discovered and its session opened
    without the secret in the log. (An upstream that prints the value back in a
    result, like get-env, would show up in rmcp's debug trace of that result.)"""
    secret = f"s3cret-{uuid.uuid4().hex}"
    config = secret_config(wf, everything_bin, "WF_TEST_VALUE")
    client = wf.stdio_client(
        "auto", "--config", str(config), "--log-level", "debug", env={"WF_TEST_VALUE": secret}
    )
    log = wf.logs[-1]
    async with client as c:
        await wait_listed(c, "ev__echo")
        with anyio.fail_after(OP_TIMEOUT):
            echoed = await c.call_tool("ev__echo", {"message": "no secrets here"})
            assert "no secrets here" in content_text(echoed.content)
    text = log.read_text(errors="replace")
    assert "DEBUG" in text and "upstream session open" in text, f"not a debug log:\n{text[-2000:]}"
    assert secret not in text, "the secret appears in wf's debug log"


def test_check_names_key_and_variable_of_an_unset_var(wf: Wf, everything_bin: Path) -> None:
    var = "WF_TEST_UNSET_" + uuid.uuid4().hex[:8].upper()
    config = secret_config(wf, everything_bin, var)
    proc = wf.run("check", "--config", str(config))
    assert proc.returncode == 1, f"wf check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "sources.ev.env.WF_TEST_SECRET" in proc.stderr, proc.stderr
    assert var in proc.stderr, proc.stderr
    assert config.name in proc.stderr, proc.stderr


async def test_serve_with_an_unset_var_still_serves_the_rest(wf: Wf, everything_bin: Path, fixture_upstream_bin: Path) -> None:
    var = "WF_TEST_UNSET_" + uuid.uuid4().hex[:8].upper()
    config = wf.write_config(
        toml_config(
            {
                "ev": {"command": str(everything_bin), "env": {"WF_TEST_SECRET": f"${{{var}}}"}},
                "fx": {"command": str(fixture_upstream_bin)},
            }
        )
    )
    client = wf.stdio_client("auto", "--config", str(config))
    log = wf.logs[-1]
    async with client as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = await all_tools(c)
    assert source_tools(tools, "fx") == FX_TOOLS
    assert source_tools(tools, "ev") == set()
    assert "wf_std__passthrough" in {t.name for t in tools}
    text = log.read_text(errors="replace")
    assert var in text and "sources.ev.env.WF_TEST_SECRET" in text, text


# --------------------------------------------------------------------------- allow/deny


@pytest.mark.parametrize("upstream", ["fixture", "everything"])
async def test_allow_tools_shows_only_the_allowed(
    wf: Wf, fixture_upstream_bin: Path, everything_bin: Path, upstream: str
) -> None:
    command, hidden = (
        (fixture_upstream_bin, "increment") if upstream == "fixture" else (everything_bin, "get-sum")
    )
    config = wf.write_config(toml_config({"up": {"command": str(command), "allow_tools": ["echo"]}}))
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        # server-everything (node) can take longer than the startup grace to be discovered.
        tools = await wait_listed(c, "up__echo")
        with anyio.fail_after(OP_TIMEOUT):
            assert source_tools(tools, "up") == {"echo"}
            echoed = await c.call_tool("up__echo", {"message": "allowed"})
            assert "allowed" in content_text(echoed.content)
            _, error = await call_outcome(c, f"up__{hidden}", {"a": 1, "b": 2})
    assert error is not None and f"up__{hidden}" in error, error


async def test_deny_tools_hides_and_refuses_the_denied(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(
        toml_config({"fx": {"command": str(fixture_upstream_bin), "deny_tools": ["crash", "pid"]}})
    )
    async with wf.client("stdio", "legacy", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = await all_tools(c)
            assert source_tools(tools, "fx") == FX_TOOLS - {"crash", "pid"}
            assert (await c.call_tool("fx__increment", {})).structured_content == {"count": 1}
            _, error = await call_outcome(c, "fx__crash")
            assert error is not None and "fx__crash" in error, error
            # The refused crash never reached the upstream: same session, same counter.
            assert (await c.call_tool("fx__increment", {})).structured_content == {"count": 2}
