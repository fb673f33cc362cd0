"""An argument rule on a real API's operation: "support may create issues only in
acme's repositories", on GitHub's own `issues/create` operation (from the pinned
`@octokit/openapi` document, cut down to that operation and what it refers to),
served by wf's `openapi` source against Stoplight Prism, an independent mock that
validates each request against the document.

The allowed call reaches Prism and comes back with GitHub's 201 example; the
denied one is refused with the policy's id and reason and never reaches it; the
rule holds through `wf_call` as well.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Wf, call_outcome, toml_config, wait_listed
from test_openapi_real import GITHUB, Prism, need

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
PATH = "/repos/{owner}/{repo}/issues"

POLICIES = """\
@id("baseline")
permit(principal, action, resource);

@id("issues-in-acme-only")
@reason("issues are created in acme's repositories only")
forbid(principal, action == wf::Action::"gh__issues_create", resource)
unless { context.arguments.owner == "acme" };
"""


def refs(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/"):
            out.add(ref)
        for v in value.values():
            refs(v, out)
    elif isinstance(value, list):
        for v in value:
            refs(v, out)


def github_issues_create(to: Path) -> Path:
    """GitHub's document with `POST /repos/{owner}/{repo}/issues` only, and every
    component it refers to, directly or not."""
    need(GITHUB)
    doc = json.loads(GITHUB.read_text())
    operation = doc["paths"][PATH]["post"]
    components: dict[str, dict[str, Any]] = {}
    todo: set[str] = set()
    refs(operation, todo)
    seen: set[str] = set()
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        item = doc["components"][kind][name]
        components.setdefault(kind, {})[name] = item
        refs(item, todo)
    cut = {
        "openapi": doc["openapi"],
        "info": doc["info"],
        "servers": doc.get("servers", []),
        "paths": {PATH: {"post": operation}},
        "components": components,
    }
    to.write_text(json.dumps(cut))
    return to


async def test_issues_are_created_in_acme_only(wf: Wf) -> None:
    doc = github_issues_create(wf.root / "github-issues-create.json")
    prism = Prism(doc, wf.root / "prism.log")
    try:
        wf.write_config(POLICIES, "policy.cedar")
        text = toml_config(
            {"gh": {"kind": "openapi", "spec": str(doc), "base_url": prism.base, "headers": {"Authorization": "token x"}}}
        )
        config = wf.write_config('[policy]\nfiles = ["policy.cedar"]\n\n' + text)
        async with wf.stdio_client("auto", "--config", str(config)) as c:
            with anyio.fail_after(OP_TIMEOUT):
                await wait_listed(c, "gh__issues_create")
                ok, error = await call_outcome(
                    c, "gh__issues_create", {"owner": "acme", "repo": "site", "body": {"title": "Broken link"}}
                )
                assert error is None, error
                assert ok is not None and ok.structured_content is not None, ok
                for name, arguments in [
                    ("gh__issues_create", {"owner": "other", "repo": "site", "body": {"title": "Nope"}}),
                    (
                        "wf_call",
                        {
                            "name": "gh__issues_create",
                            "arguments": {"owner": "evil", "repo": "site", "body": {"title": "Nope"}},
                        },
                    ),
                ]:
                    _, refused = await call_outcome(c, name, arguments)
                    assert refused is not None, f"{name}: a call outside acme was not refused"
                    assert "issues-in-acme-only" in refused and "acme's repositories only" in refused, refused
    finally:
        prism.stop()
    log = prism.log.read_text(errors="replace")
    assert "/repos/acme/site/issues" in log, f"the allowed call did not reach Prism:\n{log[-2000:]}"
    assert "/repos/other/" not in log and "/repos/evil/" not in log, "a refused call reached the API"
    violations = [line for line in log.splitlines() if "Request did not pass" in line]
    assert not violations, "Prism found the allowed request invalid:\n" + "\n".join(violations)
