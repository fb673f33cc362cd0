"""Two promises of the operator manual that no test held (issue #48):

- `[store] handle_secret` is required with `[store] url`, and must be at
  least 16 characters: `wf serve` refuses to start without it, or with a
  shorter one, naming the key; a long enough one passes that check (and the
  server then fails on the unreachable database, a different error);
- the `[server.catalog] max_schema_bytes` budget: a list whose definitions
  would exceed it lists the meta-tools first, then only the tools that fit;
  without the budget the whole catalog is listed.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from conftest import Wf, all_tools

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
META = ["wf_find", "wf_describe", "wf_call"]
# Nothing listens on port 1: a server that passes the secret check fails here.
STORE = '[store]\nurl = "postgres://wf:wf@127.0.0.1:1/wf"\n'


def serve_once(wf: Wf, config_text: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    config = wf.write_config(config_text)
    r = wf.run("serve", *wf.plugin_args(), "--config", str(config), timeout=60, env=env)
    return r.returncode, r.stderr


def test_a_store_url_needs_a_handle_secret(wf: Wf) -> None:
    code, err = serve_once(wf, STORE)
    assert code != 0 and "[store] url needs [store] handle_secret" in err, err


@pytest.mark.parametrize("secret", ["", "fifteen-chars-x"])
def test_a_handle_secret_needs_16_characters(wf: Wf, secret: str) -> None:
    assert len(secret) < 16
    code, err = serve_once(wf, STORE + 'handle_secret = "${WF_TEST_HANDLE_SECRET}"\n', {"WF_TEST_HANDLE_SECRET": secret})
    assert code != 0 and "handle_secret is empty, unset in the environment or shorter than 16 characters" in err, err


def test_a_long_enough_handle_secret_passes_the_check(wf: Wf) -> None:
    secret = "sixteen-chars-ok"
    assert len(secret) == 16
    code, err = serve_once(wf, STORE + 'handle_secret = "${WF_TEST_HANDLE_SECRET}"\n', {"WF_TEST_HANDLE_SECRET": secret})
    # It goes on to the database, which is not there.
    assert code != 0 and "handle_secret" not in err, err
    assert secret not in err, "the secret leaked into the log"


def size(tool: Any) -> int:
    """A definition's compact JSON size as the client received it."""
    data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())


async def listed(wf: Wf, budget: int | None) -> list[Any]:
    text = "" if budget is None else f"[server.catalog]\nmax_schema_bytes = {budget}\n"
    config = wf.write_config(text, f"budget-{budget}.toml")
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            return await all_tools(c)


async def test_the_schema_bytes_budget_bounds_the_list(wf: Wf) -> None:
    full = await listed(wf, None)
    names = [t.name for t in full]
    assert not set(META) & set(names), names
    assert len(full) >= 4, names
    # A budget nothing exceeds changes nothing.
    assert [t.name for t in await listed(wf, 100_000_000)] == names
    # A budget nothing fits: the meta-tools alone (they reach the rest).
    tiny = await listed(wf, 1)
    assert [t.name for t in tiny] == META, [t.name for t in tiny]
    meta_bytes = sum(size(t) for t in tiny)
    # Room for the meta-tools and about half of the catalog's definitions.
    budget = meta_bytes + sum(size(t) for t in full) // 2
    small = await listed(wf, budget)
    small_names = [t.name for t in small]
    assert small_names[:3] == META, small_names
    rest = small_names[3:]
    assert 0 < len(rest) < len(full), (len(rest), len(full))
    assert set(rest) <= set(names), rest
    # What is listed fits the budget (as the client measures it; the server
    # counts its own compact JSON, the same within a few bytes a tool).
    assert sum(size(t) for t in small) <= budget + 16 * len(small), (sum(size(t) for t in small), budget)
