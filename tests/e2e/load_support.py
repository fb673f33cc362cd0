"""A load generator the load tests run in a process of its own, so that its
clients never share an event loop with the clients being measured.

    python load_support.py flood URL TOKEN CLIENTS CALLS_PER_CLIENT SECONDS

`flood`: CLIENTS legacy-mode clients of principal TOKEN, each keeping
CALLS_PER_CLIENT `wf_std__sleep` calls of 2 s in flight at once (a new one as
each ends), for SECONDS or until terminated. Prints one line of counts at the
end: answered, refused at a per-principal bound, other errors.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

counts = {"ok": 0, "refused": 0, "other": 0}


async def flood(url: str, token: str, clients: int, per_client: int, seconds: float) -> None:
    async def caller(c: Client) -> None:
        while True:
            try:
                await c.call_tool("wf_std__sleep", {"ms": 2000})
                counts["ok"] += 1
            except MCPError as e:
                counts["refused" if "server.max_" in e.message else "other"] += 1
                await anyio.sleep(0.2)

    async def client() -> None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None, read_timeout_seconds=60) as c:
                async with anyio.create_task_group() as tg:
                    for _ in range(per_client):
                        tg.start_soon(caller, c)

    with anyio.move_on_after(seconds):
        async with anyio.create_task_group() as tg:
            for _ in range(clients):
                tg.start_soon(client)


def main() -> None:
    what, url, token, clients, per_client, seconds = sys.argv[1:7]
    assert what == "flood", what
    # SIGTERM ends the flood at once, counts printed: unwinding hundreds of
    # calls in flight (each client's session closed) could outlast the test's
    # wait for the process.
    signal.signal(signal.SIGTERM, lambda *_: (print(counts, flush=True), os._exit(0)))
    try:
        anyio.run(flood, url, token, int(clients), int(per_client), float(seconds))
    finally:
        print(counts, flush=True)


if __name__ == "__main__":
    main()
