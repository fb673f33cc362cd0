"""Captures real MCP servers' own `tools/list` into bench/retrieval/tools.json,
the catalog of the retrieval benchmark (`wf-bench --only retrieval`,
docs/benchmarks.md "Finding tools in a large catalog").

Run once, by hand; the output is checked in and nothing here is a runtime or
test dependency. How it was captured (2026-12-03):

    mkdir /tmp/mcpcap && cd /tmp/mcpcap && npm init -y
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --ignore-scripts <the packages in SERVERS below, latest on that day>
    tests/e2e/.venv/bin/python bench/retrieval/capture.py /tmp/mcpcap/node_modules tests/e2e/node_modules

Each server is started over stdio with the official Python `mcp` client
(2025-11-25, declaring elicitation, sampling and roots, so capability-gated
tools are listed too), with placeholder credentials where a server refuses to
start without them (none of them is called: only `tools/list` is sent). A
server that does not start or list within 60 s is reported and skipped. The
installed version of each package is recorded beside its tools.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types

# (source name, npm package, bin or script relative to the package, args, env)
SERVERS: list[tuple[str, str, str, list[str], dict[str, str]]] = [
    ("everything", "@modelcontextprotocol/server-everything", "dist/index.js", [], {}),
    ("filesystem", "@modelcontextprotocol/server-filesystem", "dist/index.js", ["/tmp"], {}),
    ("memory", "@modelcontextprotocol/server-memory", "dist/index.js", [], {}),
    ("thinking", "@modelcontextprotocol/server-sequential-thinking", "dist/index.js", [], {}),
    ("github", "@modelcontextprotocol/server-github", "dist/index.js", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": "placeholder"}),
    ("slack", "@modelcontextprotocol/server-slack", "dist/index.js", [], {"SLACK_BOT_TOKEN": "xoxb-placeholder", "SLACK_TEAM_ID": "T0"}),
    ("gitlab", "@modelcontextprotocol/server-gitlab", "dist/index.js", [], {"GITLAB_PERSONAL_ACCESS_TOKEN": "placeholder"}),
    ("maps", "@modelcontextprotocol/server-google-maps", "dist/index.js", [], {"GOOGLE_MAPS_API_KEY": "placeholder"}),
    ("brave", "@modelcontextprotocol/server-brave-search", "dist/index.js", [], {"BRAVE_API_KEY": "placeholder"}),
    ("puppeteer", "@modelcontextprotocol/server-puppeteer", "dist/index.js", [], {}),
    ("redis", "@modelcontextprotocol/server-redis", "dist/index.js", ["redis://127.0.0.1:1"], {}),
    ("everart", "@modelcontextprotocol/server-everart", "dist/index.js", [], {"EVERART_API_KEY": "placeholder"}),
    ("notion", "@notionhq/notion-mcp-server", "bin/cli.mjs", [], {"NOTION_TOKEN": "placeholder"}),
    ("devtools", "chrome-devtools-mcp", "build/src/bin/chrome-devtools-mcp.js", ["--headless", "--isolated", "--executablePath", "/usr/bin/chromium"], {}),
    ("supabase", "@supabase/mcp-server-supabase", "dist/cli.js", ["--access-token", "placeholder"], {}),
    ("kubernetes", "mcp-server-kubernetes", "dist/index.js", [], {}),
    ("commander", "@wonderwhy-er/desktop-commander", "dist/index.js", [], {}),
    ("pwexec", "@executeautomation/playwright-mcp-server", "dist/index.js", [], {}),
    ("mongodb", "mongodb-mcp-server", "dist/index.js", [], {}),
    ("heroku", "@heroku/mcp-server", "bin/heroku-mcp-server.mjs", [], {"HEROKU_API_KEY": "placeholder"}),
    ("firecrawl", "firecrawl-mcp", "dist/index.js", [], {"FIRECRAWL_API_KEY": "fc-placeholder"}),
    ("stripe", "@stripe/mcp", "dist/index.js", ["--api-key=sk_test_placeholder"], {}),
    ("azuredevops", "@azure-devops/mcp", "dist/index.js", ["contoso"], {}),
    ("neon", "@neondatabase/mcp-server-neon", "dist/index.js", ["start", "placeholder"], {}),
    ("sentry", "@sentry/mcp-server", "dist/index.js", ["--access-token=placeholder"], {}),
    ("hubspot", "@hubspot/mcp-server", "dist/index.js", [], {"PRIVATE_APP_ACCESS_TOKEN": "placeholder"}),
    ("circleci", "@circleci/mcp-server-circleci", "dist/index.js", [], {"CIRCLECI_TOKEN": "placeholder"}),
    ("airtable", "airtable-mcp-server", "dist/main.js", [], {"AIRTABLE_API_KEY": "placeholder"}),
    ("exa", "exa-mcp-server", "dist/stdio.cjs", [], {"EXA_API_KEY": "placeholder"}),
    ("tavily", "tavily-mcp", "build/index.js", [], {"TAVILY_API_KEY": "placeholder"}),
    ("context7", "@upstash/context7-mcp", "dist/index.js", [], {}),
    ("launchdarkly", "@launchdarkly/mcp-server", "bin/mcp-server.js", ["start", "--api-key", "placeholder"], {}),
    ("mapbox", "@mapbox/mcp-server", "dist/index.js", [], {"MAPBOX_ACCESS_TOKEN": "pk.placeholder"}),
    ("digitalocean", "@digitalocean/mcp", "index.js", [], {"DIGITALOCEAN_API_TOKEN": "placeholder"}),
    ("postgres", "@modelcontextprotocol/server-postgres", "dist/index.js", ["postgresql://127.0.0.1:1/x"], {}),
    ("awskb", "@modelcontextprotocol/server-aws-kb-retrieval", "dist/index.js", [], {"AWS_ACCESS_KEY_ID": "placeholder", "AWS_SECRET_ACCESS_KEY": "placeholder", "AWS_REGION": "us-east-1"}),
    ("playwright", "@playwright/mcp", "cli.js", ["--caps=vision,pdf,testing,tracing", "--headless", "--isolated", "--executable-path", "/usr/bin/chromium"], {}),
]


def package_dir(roots: list[Path], package: str) -> Path | None:
    for r in roots:
        if (r / package / "package.json").exists():
            return r / package
    return None


async def capture(name: str, pkg_dir: Path, entry: str, args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    script = pkg_dir / entry
    if not script.exists():
        bins = json.loads((pkg_dir / "package.json").read_text()).get("bin")
        entry = bins if isinstance(bins, str) else next(iter((bins or {}).values()), entry)
        script = pkg_dir / entry
    base_env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": "/tmp"}
    params = StdioServerParameters(command="node", args=[str(script), *args], env={**base_env, **env})

    async def elicit(_c: Any, _p: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def sample(_c: Any, _p: Any) -> Any:
        raise RuntimeError("not called")

    async def roots(_c: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    tools: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None, elicitation_callback=elicit, sampling_callback=sample, list_roots_callback=roots) as c:
            cursor = None
            while True:
                page = await c.list_tools(cursor=cursor)
                tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
    return tools


async def main() -> None:
    roots = [Path(p) for p in sys.argv[1:]]
    out: list[dict[str, Any]] = []
    for name, package, entry, args, env in SERVERS:
        pkg_dir = package_dir(roots, package)
        if pkg_dir is None:
            print(f"skip {name}: {package} is not installed", file=sys.stderr)
            continue
        version = json.loads((pkg_dir / "package.json").read_text())["version"]
        try:
            tools = await capture(name, pkg_dir, entry, args, env)
        except BaseException as e:  # noqa: BLE001 - a server that fails is reported and skipped
            print(f"skip {name} ({package}@{version}): {type(e).__name__}: {e}", file=sys.stderr)
            continue
        print(f"{name}: {package}@{version}: {len(tools)} tools", file=sys.stderr)
        out.append({"source": name, "package": package, "version": version, "tools": tools})
    total = sum(len(s["tools"]) for s in out)
    print(f"{len(out)} servers, {total} tools", file=sys.stderr)
    path = Path(__file__).with_name("tools.json")
    path.write_text(json.dumps({"captured": "2026-12-03", "servers": out}, indent=1) + "\n")


if __name__ == "__main__":
    anyio.run(main)
