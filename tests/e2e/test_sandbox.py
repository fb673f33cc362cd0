"""The plugin sandbox through `wf serve` (issue #32): the hostile snoop
fixture (tests/fixtures/snoop) runs in process mode with `sandbox =
"strict"` and tries to read wf's environment (`/proc/<wf pid>/environ`),
wf's config, another source's token file, to run a shell, to ptrace wf and
to read wf's memory. The plugin returns what it saw; every attempt must have
failed, and nothing secret may be in its answer.

Needs process mode (`[plugins.<name>] isolation = "process"`, issue #32 part
A). host/tests/sandbox.rs proves the same sandbox without wf in between,
and that each attempt succeeds with the sandbox off."""

from __future__ import annotations

import errno
import os
import socket
import uuid

import anyio
import pytest

from conftest import Wf

pytestmark = pytest.mark.anyio

SECRET_ENV = "wf-env-secret-5b1c"
SECRET_CONFIG = "wf-config-secret-77d0"
SECRET_TOKEN = "other-source-token-a3f9"


def config_text(mode: str) -> str:
    return f"""# {SECRET_CONFIG}
[plugins.fixture-snoop]
isolation = "process"
sandbox = "{mode}"
"""


async def snoop(wf: Wf, mode: str, **probes: bool) -> dict:
    config = wf.write_config(config_text(mode))
    token = wf.state_dir / "sources" / "other" / "token.json"
    token.parent.mkdir(parents=True, exist_ok=True)
    token.write_text(f'{{"access_token": "{SECRET_TOKEN}"}}')
    wf.install("snoop")
    args = {"files": [str(config), str(token)], "exec": True, "ptrace": True, "addr": 4096, "len": 16, **probes}
    with anyio.fail_after(60):
        async with wf.stdio_client("auto", "--config", str(config), env={"WF_TEST_SECRET": SECRET_ENV}) as c:
            r = await c.call_tool("snoop__snoop", args)
    assert not r.is_error, r
    return r.structured_content


async def test_strict_sandbox_denies_every_attempt(wf: Wf) -> None:
    seen = await snoop(wf, "strict")
    text = repr(seen)
    for secret in (SECRET_ENV, SECRET_CONFIG, SECRET_TOKEN):
        assert secret not in text, seen
    assert seen["environ"]["ok"] is False and seen["environ"]["errno"] == errno.EACCES, seen["environ"]
    # Both files were tried (an empty answer would pass the loop below).
    assert len(seen["files"]) == 2, seen["files"]
    for path, attempt in seen["files"].items():
        assert attempt["ok"] is False and attempt["errno"] == errno.EACCES, (path, attempt)
    assert seen["exec"]["ok"] is False and seen["exec"]["errno"] == errno.EPERM, seen["exec"]
    assert seen["ptrace"]["ok"] is False and seen["ptrace"]["errno"] == errno.EPERM, seen["ptrace"]
    assert seen["vm_read"]["ok"] is False and seen["vm_read"]["errno"] == errno.EPERM, seen["vm_read"]


async def test_the_control_without_the_sandbox_reads_the_files(wf: Wf) -> None:
    # The same plugin, same process mode, sandbox off: the files are read,
    # so the strict test's failures are the sandbox's doing. (environ, exec
    # and ptrace are left out: the child's cleared environment and the
    # parent's safety are process mode's business, not the sandbox's.)
    seen = await snoop(wf, "off", exec=False, ptrace=False)
    files = seen["files"]
    assert len(files) == 2, files
    assert any(SECRET_CONFIG in a.get("data", "") for a in files.values()), files
    assert any(SECRET_TOKEN in a.get("data", "") for a in files.values()), files


def test_wf_plugins_says_what_the_child_may_do(wf: Wf) -> None:
    config = wf.write_config(config_text("strict"))
    wf.install("snoop")
    doc = wf.plugins_json("--config", str(config))
    ours = [p for p in doc["loaded"] if p["name"] == "fixture-snoop"]
    assert len(ours) == 1, doc
    text = repr(ours[0])
    assert "no ptrace" in text and "no exec" in text, ours[0]


# ---- the rest of the manual's "Plugin sandbox" promises, with the hostile
# fixture (tests/fixtures/hostile): each probe's strict outcome, and the
# same probe with the sandbox off as the control that it can fail.

# Denied with EPERM besides ptrace/process_vm_readv/execve (the table).
DENIED = ["pidfd_getfd", "kcmp", "perf_event_open", "keyctl", "process_vm_writev", "execveat"]


async def hostile(wf: Wf, mode: str, name: str, arguments: dict | None = None, *, serve_extra: str = "") -> dict:
    config = wf.write_config(f'[plugins.fixture-hostile]\nsandbox = "{mode}"\n{serve_extra}', f"hostile-{mode}.toml")
    wf.install("hostile")
    with anyio.fail_after(60):
        async with wf.stdio_client("auto", "--config", str(config)) as c:
            r = await c.call_tool(f"hostile__{name}", arguments or {})
    assert not r.is_error, r
    return r.structured_content


async def test_every_capability_is_dropped(wf: Wf) -> None:
    caps = await hostile(wf, "strict", "caps")
    assert set(caps) >= {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}, caps
    assert all(int(v, 16) == 0 for v in caps.values()), caps


@pytest.mark.skipif(os.geteuid() != 0, reason="the control needs a root wf: only root's child has capabilities to drop")
async def test_the_control_root_child_keeps_capabilities_without_the_sandbox(wf: Wf) -> None:
    caps = await hostile(wf, "off", "caps")
    assert int(caps["CapEff"], 16) != 0 and int(caps["CapBnd"], 16) != 0, caps


async def test_the_denied_syscalls_answer_eperm(wf: Wf) -> None:
    seen = await hostile(wf, "strict", "syscalls")
    for name in [*DENIED, "ptrace", "process_vm_readv", "execve"]:
        assert seen[name]["ok"] is False and seen[name]["errno"] == errno.EPERM, (name, seen[name])


async def test_the_control_without_the_sandbox_allows_those_syscalls(wf: Wf) -> None:
    # The probes' arguments make each one succeed, or fail otherwise than
    # EPERM, when no filter denies it: the strict test's EPERMs are the filter's.
    seen = await hostile(wf, "off", "syscalls")
    for name in DENIED:
        assert seen[name].get("errno") != errno.EPERM, (name, seen[name])


def abstract_listener() -> tuple[socket.socket, str]:
    name = f"wf-test-{uuid.uuid4().hex[:12]}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(8)
    return s, name


async def test_landlock_scopes_signals_and_abstract_sockets(wf: Wf) -> None:
    """Landlock ABI 6: the child cannot signal a process outside its sandbox
    (its namespace's init, the one such process it can name: wf is not even
    nameable from its PID namespace) nor connect to an abstract unix socket
    made outside it (this test's)."""
    listener, name = abstract_listener()
    with listener:
        seen = await hostile(wf, "strict", "abstract", {"name": name})
    assert seen == {"ok": False, "errno": errno.EPERM}, seen
    seen = await hostile(wf, "strict", "signal", {"pid": 1})
    assert seen == {"ok": False, "errno": errno.EPERM}, seen


async def test_the_control_without_the_sandbox_signals_and_connects(wf: Wf) -> None:
    listener, name = abstract_listener()
    with listener:
        seen = await hostile(wf, "off", "abstract", {"name": name})
    assert seen["ok"] is True, seen
    seen = await hostile(wf, "off", "signal", {"pid": 1})
    assert seen["ok"] is True, seen
