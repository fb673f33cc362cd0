"""Every progress report of a call reaches an HTTP client, whatever it declares
and whichever protocol generation it speaks (2025-11-25 `legacy`, 2026-07-28
`auto`), with the official Python client against the real `wf serve --http`.

The case that broke: a 2026-07-28 client that declares roots (and elicitation,
sampling) calls server-everything's long-running operation. server-everything
asks its client for roots shortly after wf opens the upstream session, i.e.
during the call, so wf answers the call with an `InputRequiredResult`, the
client retries with its roots, and the call goes on in a second round. Its
later progress reports must go to the retry (the request that is open, with
its progress token), not to the first request, whose stream is closed.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from caller_support import Answerer
from conftest import Wf, content_text, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
STEPS = 4
TOOLS = {
    # Long enough that server-everything's roots request lands mid-call.
    "everything": ("everything__trigger-long-running-operation", {"duration": 2, "steps": STEPS}),
    "fixture": ("fix__progress", {"steps": STEPS, "interval_ms": 100}),
}


@pytest.mark.parametrize("upstream", sorted(TOOLS))
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("asks", [False, True], ids=["no-callbacks", "callbacks"])
async def test_every_progress_report_arrives(
    wf: Wf, everything_bin: Path, fixture_upstream_bin: Path, upstream: str, mode: str, asks: bool
) -> None:
    command = everything_bin if upstream == "everything" else fixture_upstream_bin
    source = "everything" if upstream == "everything" else "fix"
    config = wf.write_config(toml_config({source: {"command": str(command)}}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    answers = Answerer()
    kw = answers.callbacks() if asks else {}
    name, args = TOOLS[upstream]
    async with wf.http_client(server, mode, **kw) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await wait_listed(c, name)
            steps: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                steps.append(progress)

            r = await c.call_tool(name, args, progress_callback=on_progress)
    assert not r.is_error, content_text(r.content)
    assert steps == [float(i) for i in range(1, STEPS + 1)], steps
    if asks and upstream == "everything":
        # The call did take the path under test: the client was asked mid-call
        # (in 2026-07-28, only a call's input round can ask it anything).
        assert answers.roots_asked == 1, answers.roots_asked
