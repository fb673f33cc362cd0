"""The plugin folder is judged before anything in it is loaded (issue 15,
findings 8 and 9), proven from outside:

- loading a library runs its constructors; tests/fixtures/no-export has an
  ELF constructor that writes the file named by WF_FIXTURE_CTOR_MARKER. From
  a safe folder the marker appears (the control: the probe works); from a
  world-writable folder, a group-writable file or a folder of another user,
  `wf plugins` and `wf serve` refuse with one line and the marker never
  appears. `--allow-insecure-plugin-dir` is the explicit override.
- a rebuilt plugin is loaded from a copy in a fresh private folder (0700,
  random name) under the state directory, never from a predictable /tmp
  path, and the folder is removed when wf exits.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from admin_support import admin, tool_names
from conftest import Wf, descendants_of, fixture_filename, wait_processes_gone

OP_TIMEOUT = 30
MARKER_ENV = "WF_FIXTURE_CTOR_MARKER"


def in_process(wf: Wf) -> list[str]:
    """The fixture's constructor reads the marker's path from the environment,
    which a plugin in process mode does not get: these tests load in process
    (folder safety is judged the same way before either mode loads a file)."""
    return ["--config", str(wf.write_config('[server]\nplugin_isolation = "in_process"\n', "in-process.toml"))]


def plugins(wf: Wf, *extra: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    proc = wf.run("plugins", "--json", *wf.plugin_args(), *in_process(wf), *extra, env=env)
    return proc.returncode, json.loads(proc.stdout)


def refusal_of(doc: dict[str, Any], path: Path) -> str:
    hits = [r["reason"] for r in doc["refused"] if Path(r["file"]) == path]
    assert len(hits) == 1, f"no single refusal for {path}: {doc['refused']}"
    return hits[0]


def test_control_a_safe_folder_runs_the_constructor(wf: Wf) -> None:
    """Without this, "no marker" below would prove nothing."""
    marker = wf.root / "ctor-ran"
    lib = wf.install("no-export")
    code, doc = plugins(wf, env={MARKER_ENV: str(marker)})
    assert code == 1 and "export_plugin!" in refusal_of(doc, lib)
    assert marker.exists(), "the fixture's constructor did not run from a safe folder"


def test_world_writable_folder_is_refused_before_loading(wf: Wf) -> None:
    marker = wf.root / "ctor-ran"
    wf.install("no-export")
    os.chmod(wf.plugin_dir, 0o777)
    code, doc = plugins(wf, env={MARKER_ENV: str(marker)})
    assert code == 1
    reason = refusal_of(doc, wf.plugin_dir)
    assert "world-writable" in reason and "chmod go-w" in reason and "--allow-insecure-plugin-dir" in reason, reason
    assert "\n" not in reason
    assert not marker.exists(), "a library in a world-writable folder was loaded (its constructor ran)"
    # The plugins next to wf still load.
    assert "wf-source-std" in {p["name"] for p in doc["loaded"]}


@pytest.mark.anyio
async def test_serve_refuses_a_world_writable_folder_and_keeps_serving(wf: Wf) -> None:
    marker = wf.root / "ctor-ran"
    wf.install("no-export")
    wf.install("call-panics")
    os.chmod(wf.plugin_dir, 0o777)
    async with wf.stdio_client("auto", *in_process(wf), env={MARKER_ENV: str(marker)}) as c:
        names = await tool_names(c)
        assert "wf_std__const" in names
        assert not any(n.startswith("panicky__") for n in names), "a plugin from an unsafe folder is served"
        listed = await admin(c, "list_plugins")
        assert any(Path(r["file"]) == wf.plugin_dir and "world-writable" in r["reason"] for r in listed["refused"])
    assert not marker.exists()


def test_group_writable_file_is_refused_before_loading(wf: Wf) -> None:
    marker = wf.root / "ctor-ran"
    lib = wf.install("no-export")
    os.chmod(lib, 0o664)
    code, doc = plugins(wf, env={MARKER_ENV: str(marker)})
    assert code == 1
    reason = refusal_of(doc, lib)
    assert "group-writable" in reason and "chmod go-w" in reason, reason
    assert not marker.exists()


def test_folder_of_another_user_is_refused(wf: Wf) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder to another user (CI runs as root)")
    marker = wf.root / "ctor-ran"
    wf.install("no-export")
    os.chown(wf.plugin_dir, 65534, 65534)
    code, doc = plugins(wf, env={MARKER_ENV: str(marker)})
    assert code == 1
    reason = refusal_of(doc, wf.plugin_dir)
    assert "owned by uid 65534" in reason, reason
    assert not marker.exists()


def test_allow_insecure_plugin_dir_is_the_override(wf: Wf) -> None:
    marker = wf.root / "ctor-ran"
    lib = wf.install("no-export")
    os.chmod(wf.plugin_dir, 0o777)
    code, doc = plugins(wf, "--allow-insecure-plugin-dir", env={MARKER_ENV: str(marker)})
    assert marker.exists(), "the override did not load the folder"
    assert "export_plugin!" in refusal_of(doc, lib)
    assert any("--allow-insecure-plugin-dir" in n["note"] for n in doc["notes"]), doc["notes"]


@pytest.mark.anyio
async def test_rebuilt_plugin_is_copied_into_a_private_folder_under_the_state_dir(wf: Wf) -> None:
    """A refused file that changes is loaded, on reload, from a copy (the OS
    would hand back the refused mapping for the same path)."""
    target = wf.plugin_dir / fixture_filename("call-panics")
    target.write_text("not a library yet\n")
    async with wf.stdio_client("auto", *in_process(wf)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            listed = await admin(c, "list_plugins")
            assert any(Path(r["file"]) == target for r in listed["refused"]), listed
            wf.install("call-panics")  # the "rebuild": same path, new contents
            outcome = await admin(c, "reload")
            assert "fixture-call-panics" in outcome["plugins_loaded"], outcome

            copies = [p for p in wf.state_dir.iterdir() if p.name.startswith("plugin-reload-")]
            assert len(copies) == 1, list(wf.state_dir.iterdir())
            folder = copies[0]
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, oct(folder.stat().st_mode)
            suffix = folder.name.removeprefix("plugin-reload-")
            assert len(suffix) >= 6, folder.name
            files = list(folder.iterdir())
            assert len(files) == 1 and files[0].name.endswith(target.name), files

            procs = [p for p in descendants_of(os.getpid()) if str(wf.state_dir) in _cmdline(p.pid)]
            assert len(procs) == 1, procs
            wf_proc = procs[0]
            maps = Path(f"/proc/{wf_proc.pid}/maps").read_text()
            assert str(files[0]) in maps, "the rebuilt plugin was not loaded from the private copy"
            assert f"wf-plugin-reload-{wf_proc.pid}" not in maps
            assert not Path(f"/tmp/wf-plugin-reload-{wf_proc.pid}").exists()
    assert wait_processes_gone([wf_proc], timeout=OP_TIMEOUT) == []
    assert not folder.exists(), "the private copy folder was left behind after wf exited"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
