"""FastMCP's proxy as a peer row of `wf-bench --peers` (docs/benchmarks.md).

Serves FastMCP's proxy (`FastMCP.as_proxy` before fastmcp 3; `create_proxy`
since) on stdio in front of the stdio upstream given as
arguments, over ONE upstream session (an already connected client, the way
wf multiplexes every call onto one persistent session per source).

    python fastmcp_proxy.py UPSTREAM_COMMAND [ARGS...] [--http HOST:PORT]

With a trailing `--http HOST:PORT` it serves streamable HTTP at
http://HOST:PORT/mcp instead of stdio (the HTTP front's peer row).
"""

import sys

from fastmcp import Client, FastMCP
from fastmcp.client.transports import StdioTransport

try:
    from fastmcp.server import create_proxy
except ImportError:  # fastmcp 2.x
    create_proxy = FastMCP.as_proxy


async def main(command: str, args: list[str]) -> None:
    http = None
    if len(args) >= 2 and args[-2] == "--http":
        http, args = args[-1], args[:-2]
    upstream = Client(StdioTransport(command=command, args=args))
    async with upstream:
        # A connected client: its one session serves every request.
        proxy = create_proxy(upstream, name="fastmcp-proxy")
        if http is None:
            await proxy.run_async(transport="stdio", show_banner=False)
        else:
            host, port = http.rsplit(":", 1)
            await proxy.run_async(
                transport="http", host=host, port=int(port), path="/mcp", show_banner=False
            )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: fastmcp_proxy.py UPSTREAM_COMMAND [ARGS...]")
    import asyncio

    asyncio.run(main(sys.argv[1], sys.argv[2:]))
