"""The guide's hello-world plugin, built from the guide's own text
(docs/plugin-authoring.md, "From `cargo new` to a loaded plugin"), so the guide
cannot drift from the code: its `Cargo.toml` and `src/lib.rs` blocks become a
crate beside a `wf` checkout (a symlink to this one, as the guide's
`path = "../wf/plugin-api"` expects), `cargo build` builds it against the
in-tree wf-plugin-api, and `wf plugins` / `wf serve` load and call it.

The build shares target/fixtures (built by tests/run) so that only the
hello crate and wf-plugin-api compile; the workspace's Cargo.lock is copied
in so dependency versions are the ones wf is tested with.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from conftest import REPO, Wf, content_text, dylib_filename

# The first build compiles wf-plugin-api's dependencies for this crate's
# feature set: minutes on a busy 2-core machine, more than pytest.ini's 300 s.
BUILD_TIMEOUT_S = 1500
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S)

GUIDE = REPO / "docs" / "plugin-authoring.md"
SECTION = "## From `cargo new` to a loaded plugin"


def guide_blocks() -> dict[str, str]:
    """The section's fenced blocks by language; exactly one `toml` and one `rust`."""
    text = GUIDE.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", text[start:end], re.M | re.S)
    by_lang: dict[str, list[str]] = {}
    for lang, body in blocks:
        by_lang.setdefault(lang, []).append(body)
    assert len(by_lang.get("toml", [])) == 1, f"want one toml block in {SECTION!r}: {by_lang.keys()}"
    assert len(by_lang.get("rust", [])) == 1, f"want one rust block in {SECTION!r}: {by_lang.keys()}"
    return {"toml": by_lang["toml"][0], "rust": by_lang["rust"][0]}


@pytest.fixture(scope="module")
def hello_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    blocks = guide_blocks()
    root = tmp_path_factory.mktemp("guide")
    (root / "wf").symlink_to(REPO)
    crate = root / "wf-hello"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(blocks["toml"])
    (crate / "src" / "lib.rs").write_text(blocks["rust"])
    shutil.copy2(REPO / "Cargo.lock", crate / "Cargo.lock")
    target = REPO / "target" / "fixtures"
    cmd = ["cargo", "build", "--manifest-path", str(crate / "Cargo.toml"), "--target-dir", str(target)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S - 60)
    assert proc.returncode == 0, f"the guide's hello-world does not build:\n{proc.stderr[-4000:]}"
    lib = target / "debug" / dylib_filename("wf_hello")
    assert lib.is_file(), f"{lib} not built"
    return lib


def test_guide_hello_world_loads(wf: Wf, hello_lib: Path) -> None:
    wf.install_file(hello_lib)
    proc = wf.run("plugins", "--json", *wf.plugin_args())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    hello = [p for p in doc["loaded"] if p["name"] == "wf-hello"]
    assert len(hello) == 1, doc
    assert hello[0]["kinds"] == ["hello"] and hello[0]["warnings"] == [], hello[0]
    assert [r for r in doc["refused"] if Path(r["file"]).parent.resolve() == wf.plugin_dir.resolve()] == []


@pytest.mark.anyio
async def test_guide_hello_world_serves_greet(wf: Wf, hello_lib: Path) -> None:
    """What the guide promises: MCP clients see hello__greet."""
    wf.install_file(hello_lib)
    async with wf.stdio_client("auto") as c:
        with anyio.fail_after(30):
            result = await c.call_tool("hello__greet", {"name": "Ada"})
    assert not result.is_error, content_text(result.content)
    assert content_text(result.content) == "hello, Ada"
