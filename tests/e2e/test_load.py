"""Many clients on one `wf serve --http` (issue: back-pressure, not a cliff),
with the official Python `mcp` client:

- 100 clients × 20 echo calls at once on the default config, in front of real
  server-everything over stdio: every call succeeds, and one upstream process
  serves them all (an unset session scope is `shared`);
- 300 clients × 20 calls with the default bound of 64 calls in progress per
  principal and a short queue wait: every call either succeeds (after waiting
  in its principal's queue) or is refused with the limit named; none hangs,
  wf's memory stays bounded and its file descriptors return to the baseline;
- two principals, one flooding: every call of the other is served, none of
  them waits in a queue (none as long as `queue_wait_ms`) or is refused, and
  `/metrics` shows the flooder's queue and refusals (the latencies are the
  benchmarks' business: docs/benchmarks.md).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import HttpServer, Wf, call_outcome, descendants_of, toml_config
from hardening_support import rss_kib, wait_until

CLIENT_TIMEOUT = 120
# `[server] queue_wait_ms`'s default: how long a queued request waits.
QUEUE_WAIT_MS = 5000
LIMIT_NAMED = "server.max_requests_per_principal"
METRICS_TOKEN = "metrics-secret-0123456789"
LOAD_SCRIPT = Path(__file__).with_name("load_support.py")


async def clients(url: str, n: int, calls: int, tool: str, args: dict[str, Any], bearer: str | None = None) -> tuple[int, list[str]]:
    """`n` legacy-mode clients at once, each making `calls` calls one after
    another; returns (calls that succeeded, every error's text)."""
    ok = 0
    errors: list[str] = []

    async def one(i: int) -> None:
        nonlocal ok
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        try:
            async with create_mcp_http_client(headers=headers) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None, read_timeout_seconds=60) as c:
                    for _ in range(calls):
                        _, error = await call_outcome(c, tool, args)
                        if error is None:
                            ok += 1
                        else:
                            errors.append(error)
        except Exception as e:  # noqa: BLE001 - a client that fails at all is a finding
            errors.append(f"client {i}: {type(e).__name__}: {e}")

    with anyio.fail_after(CLIENT_TIMEOUT):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    return ok, errors


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.anyio
async def test_a_hundred_clients_on_the_default_config(wf: Wf, everything_bin: Path) -> None:
    config = wf.write_config(toml_config({"everything": {"command": str(everything_bin)}}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    ok, errors = await clients(server.url, 100, 20, "everything__echo", {"message": "hi"})
    assert errors == [], f"{len(errors)} errors, first: {errors[:3]}"
    assert ok == 2000
    def upstreams() -> list[Any]:
        procs = descendants_of(server.proc.pid)
        return [p for p in procs if "everything" in Path(f"/proc/{p.pid}/cmdline").read_text(errors="replace")]

    # One upstream process serves every client: the persistent session's. A
    # one-shot discovery session (server-everything announces list changes at
    # start) may still be closing; it is gone within its close sequence.
    wait_until(lambda: len(upstreams()) == 1, 30, "exactly one server-everything process below wf")


@pytest.mark.anyio
async def test_three_hundred_clients_get_an_answer_or_a_retryable_refusal(wf: Wf) -> None:
    # The default bound of 64 calls in progress, a queue wait short enough
    # that some calls are refused, and room for 300 sessions and their streams.
    server_toml = {"queue_wait_ms": 300, "max_sessions": 400, "max_streams_per_principal": 400}
    config = wf.write_config(toml_config({}, server_toml))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    pid = server.proc.pid
    # Warm: wf.std discovered, the process at rest.
    ok, errors = await clients(server.url, 1, 1, "wf_std__const", {"value": 1})
    assert (ok, errors) == (1, [])
    await anyio.sleep(1)
    fds_before, rss_before = open_fds(pid), rss_kib(pid)
    peak = rss_before

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_kib(pid))
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        ok, errors = await clients(server.url, 300, 20, "wf_std__sleep", {"ms": 500})
        tg.cancel_scope.cancel()
    other = [e for e in errors if LIMIT_NAMED not in e]
    assert other == [], f"{len(other)} errors that are not the retryable refusal, first: {other[:3]}"
    assert ok + len(errors) == 6000, "every call was answered"
    assert ok > 0 and errors, f"{ok} succeeded, {len(errors)} refused: the bound was not reached"
    # Bounded: 300 sessions' worth of buffers, not a growth with the calls.
    assert peak - rss_before < 300 * 1024, f"VmRSS grew from {rss_before} KiB to {peak} KiB"
    wait_until(lambda: open_fds(pid) <= fds_before, 30, f"wf's open fds back to the baseline ({fds_before})")


@pytest.fixture
def principals_server(wf: Wf) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    tokens = {"alice": f"alice-{os.urandom(12).hex()}", "bob": f"bob-{os.urandom(12).hex()}"}
    config = wf.write_config(
        "[server]\n"
        + "".join(f'[[server.tokens]]\nname = "{n}"\ntoken = "{t}"\n' for n, t in tokens.items())
        + f'[telemetry]\nmetrics_token = "{METRICS_TOKEN}"\n'
    )
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    yield server, tokens


def scrape(server: HttpServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = httpx2.get(f"{server.base_url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, trust_env=False)
    assert r.status_code == 200, r.text
    return {(s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(r.text) for s in f.samples}


async def p50_ms(url: str, bearer: str, calls: int = 40) -> tuple[float, float, list[str]]:
    """The median and the slowest of `calls` sequential calls of one client, and its errors."""
    took: list[float] = []
    errors: list[str] = []
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as c:
            await call_outcome(c, "wf_std__const", {"value": 0})
            for i in range(calls):
                t = time.perf_counter()
                _, error = await call_outcome(c, "wf_std__const", {"value": i})
                took.append((time.perf_counter() - t) * 1000)
                if error:
                    errors.append(error)
    return statistics.median(took), max(took), errors


@pytest.mark.anyio
async def test_one_principal_flooding_does_not_delay_another(principals_server: tuple[HttpServer, dict[str, str]]) -> None:
    server, tokens = principals_server
    unloaded, _, errors = await p50_ms(server.url, tokens["alice"])
    assert errors == []
    # Bob floods from another process (so his clients do not share this event
    # loop with alice's): far more sleeping calls than his 64 slots and queue.
    flood = subprocess.Popen(
        [sys.executable, str(LOAD_SCRIPT), "flood", server.url, tokens["bob"], "8", "48", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        queued = lambda: scrape(server).get(("wf_http_queued_requests", frozenset({("principal", "bob")})), 0)  # noqa: E731
        wait_until(lambda: queued() >= 200, 60, "bob's queue to fill")
        alice_queued = lambda: scrape(server).get(("wf_http_queued_requests", frozenset({("principal", "alice")})), 0)  # noqa: E731
        loaded, slowest, errors = await p50_ms(server.url, tokens["alice"])
        still_queued = queued()
        alice_waiting = alice_queued()
    finally:
        flood.terminate()
        out, _ = flood.communicate(timeout=30)
    assert errors == [], errors
    assert still_queued >= 200, f"bob's flood was over before alice measured ({still_queued} queued)"
    # Behaviour, not a figure (docs/benchmarks.md has those): every one of
    # alice's calls was served, none waited in a queue as bob's do (up to
    # queue_wait_ms, 5 s), and none was refused (below).
    print(f"alice's p50: {unloaded:.2f} ms unloaded, {loaded:.2f} ms under bob's flood; slowest {slowest:.0f} ms")
    assert alice_waiting == 0, f"alice has {alice_waiting} requests queued"
    assert slowest < QUEUE_WAIT_MS, f"an alice call took {slowest:.0f} ms: as long as a queued request waits"
    samples = scrape(server)
    refused = sum(v for (name, labels), v in samples.items() if name == "wf_http_refused_requests_total" and ("principal", "bob") in labels)
    assert refused > 0, f"no refusal of bob's counted; flood said: {out.decode(errors='replace')[-2000:]}"
    assert not any(("principal", "alice") in labels for (name, labels) in samples if name == "wf_http_refused_requests_total")


def test_check_warns_about_limits_that_contradict(wf: Wf) -> None:
    """`wf check` names each contradiction as `file: key: warning: …`, and
    still passes: a warning is a choice the operator may make."""
    config = wf.write_config(
        toml_config(
            {"pw": {"command": "playwright-mcp", "args": ["--headless"]}},
            {"max_streams_per_principal": 8, "queue_wait_ms": 90000},
        )
    )
    check = wf.run("check", "--config", str(config))
    assert check.returncode == 0, check.stderr
    lines = [line for line in check.stderr.splitlines() if ": warning: " in line]
    keys = sorted(line.split(": ")[1] for line in lines)
    assert keys == ["server.max_streams_per_principal", "server.queue_wait_ms"], check.stderr
    assert all(line.startswith(str(config)) for line in lines), lines
