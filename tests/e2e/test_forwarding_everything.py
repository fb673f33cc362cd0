"""Server->client forwarding through wf, against the real server-everything.

An upstream that asks its client something during a call (a form, a URL to
open, its model, its roots) asks the MCP client that made the call, through
wf; its log messages reach that client too. The client is the official `mcp`
client with callbacks, in legacy (2025-11-25) mode over wf's stdio and over
`wf serve --http` (and in `auto` mode, 2026-07-28, where wf asks in
input-required rounds); the upstream runs over stdio as wf's child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import Wf, all_tools, call_outcome, content_text, toml_config, wait_listed
from caller_support import ANSWER_NAME, ROOT_URI, SAMPLED, Answerer

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
PREFIX = "everything__"
# The tools server-everything only lists to a client that declared the capability.
ASKING_TOOLS = {
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
    "get-roots-list",
}
FRONTS = ["stdio", "http"]


# Each test runs with the mcp plugin in wf and in a child of its own (issue 32).
ISOLATION = {"now": "in_process"}


@pytest.fixture(autouse=True, params=["in_process", "process"])
def isolation(request: pytest.FixtureRequest) -> str:
    ISOLATION["now"] = request.param
    return request.param


def client(wf: Wf, everything_bin: Path, front: str, mode: str = "legacy", **kw: Any) -> Client:
    text = toml_config({"everything": {"command": str(everything_bin)}})
    text += f'\n[plugins.wf-source-mcp]\nisolation = "{ISOLATION["now"]}"\n'
    config = wf.write_config(text)
    if front == "stdio":
        return wf.stdio_client(mode, "--config", str(config), **kw)
    return wf.http_client(wf.start_http("127.0.0.1", None, "--config", str(config)), mode, **kw)


@pytest.mark.parametrize("front", FRONTS)
async def test_capability_dependent_tools_are_listed(wf: Wf, everything_bin: Path, front: str) -> None:
    """wf declares what it can route, so all 17 of server-everything's tools are listed."""
    async with client(wf, everything_bin, front, **Answerer().callbacks()) as c:
        await wait_listed(c, PREFIX + "echo")
        with anyio.fail_after(OP_TIMEOUT):
            names = {t.name.removeprefix(PREFIX) for t in await all_tools(c) if t.name.startswith(PREFIX)}
    assert ASKING_TOOLS <= names, sorted(names)
    assert len(names) == 17, sorted(names)


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_requests_for_input_reach_the_calling_client(wf: Wf, everything_bin: Path, front: str, mode: str) -> None:
    """Form and URL elicitation, sampling and roots: the client's callback answers, the tool sees it.
    A 2026-07-28 client (`auto`) is asked in input-required rounds instead of requests."""
    a = Answerer()
    async with client(wf, everything_bin, front, mode, **a.callbacks()) as c:
        assert c.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25"), c.protocol_version
        await wait_listed(c, PREFIX + "trigger-elicitation-request")
        with anyio.fail_after(OP_TIMEOUT):
            form, err = await call_outcome(c, PREFIX + "trigger-elicitation-request")
            assert err is None, err
            url, err = await call_outcome(
                c, PREFIX + "trigger-url-elicitation", {"url": "https://example.com/consent", "elicitationId": "e-1"}
            )
            assert err is None, err
            sampled, err = await call_outcome(c, PREFIX + "trigger-sampling-request", {"prompt": "say hi"})
            assert err is None, err
            roots, err = await call_outcome(c, PREFIX + "get-roots-list")
            assert err is None, err

    assert f"Name: {ANSWER_NAME}" in content_text(form.content)
    assert [e.message for e in a.elicitations][0].startswith("Please provide inputs")
    url_asks = [e for e in a.elicitations if getattr(e, "mode", None) == "url"]
    assert [(str(e.url), e.elicitation_id) for e in url_asks] == [("https://example.com/consent", "e-1")]
    assert "accept" in content_text(url.content).lower()
    assert SAMPLED in content_text(sampled.content)
    assert len(a.samplings) == 1 and "say hi" in str(a.samplings[0].messages[0].content)
    assert ROOT_URI in content_text(roots.content)
    assert a.roots_asked >= 1


@pytest.mark.parametrize("front", FRONTS)
async def test_a_client_without_the_capability_makes_the_upstream_fail(
    wf: Wf, everything_bin: Path, front: str
) -> None:
    """wf never answers for a client: without elicitation/sampling, the upstream gets an error."""
    a = Answerer()
    async with client(wf, everything_bin, front, **a.callbacks(elicit=False, sample=False)) as c:
        await wait_listed(c, PREFIX + "trigger-elicitation-request")
        with anyio.fail_after(OP_TIMEOUT):
            _, elicit_err = await call_outcome(c, PREFIX + "trigger-elicitation-request")
            _, sample_err = await call_outcome(c, PREFIX + "trigger-sampling-request", {"prompt": "x"})
    # Not a fabricated `decline`: the upstream's request failed (wf answered method-not-found).
    assert elicit_err is not None and "elicitation" in elicit_err.lower(), elicit_err
    assert "declined" not in elicit_err.lower(), elicit_err
    assert sample_err is not None and "sampling" in sample_err.lower(), sample_err
    assert a.elicitations == [] and a.samplings == []


@pytest.mark.parametrize("front", FRONTS)
async def test_upstream_logging_reaches_the_client_within_its_level(wf: Wf, everything_bin: Path, front: str) -> None:
    """server-everything's simulated logging: the first message comes during the toggle call,
    the later ones (every 5 s) with no call in flight; all name the source, none is below
    the level the client set."""
    a = Answerer()
    async with client(wf, everything_bin, front, **a.callbacks()) as c:
        await wait_listed(c, PREFIX + "toggle-simulated-logging")
        with anyio.fail_after(OP_TIMEOUT):
            await c.set_logging_level("warning")
            _, err = await call_outcome(c, PREFIX + "toggle-simulated-logging")
            assert err is None, err
        # Random levels, 5 of 8 at warning or above. At least one arrives after the call
        # returned: with no call in flight, wf sends it to every client per its level.
        after_call = len(a.logs)
        await a.wait_logs(after_call + 1, timeout=90)
        with anyio.fail_after(OP_TIMEOUT):
            await call_outcome(c, PREFIX + "toggle-simulated-logging")
    severe = {"warning", "error", "critical", "alert", "emergency"}
    assert all(m.level in severe for m in a.logs), [(m.level, m.data) for m in a.logs]
    assert all((m.logger or "").startswith("everything") for m in a.logs), [m.logger for m in a.logs]
    assert all("message" in str(m.data) for m in a.logs), [m.data for m in a.logs]
