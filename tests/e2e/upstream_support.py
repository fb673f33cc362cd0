"""Helpers of the upstream-hardening tests (test_upstream_hardening.py): reading a
process's environment and peak memory from /proc, waiting on log lines, and
secrets that are random per test."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

import anyio
import pytest

from conftest import tail


def secret(tag: str) -> str:
    """A random value no process could have by chance."""
    return f"{tag}-{secrets.token_hex(16)}"


def proc_environ(pid: int) -> dict[str, str]:
    """/proc/<pid>/environ: the environment the process was started with."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if item:
            k, _, v = item.decode("utf-8", "replace").partition("=")
            env[k] = v
    return env


def proc_status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/<pid>/status (VmHWM: peak resident set size)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no {field}")


def log_matches(log: Path, pattern: str) -> list[str]:
    """The lines of `log` that match the regular expression `pattern`."""
    rx = re.compile(pattern)
    return [line for line in log.read_text(errors="replace").splitlines() if rx.search(line)]


async def wait_log(log: Path, pattern: str, what: str, timeout: float = 60.0) -> list[str]:
    """Waits until `log` has a line matching `pattern`; returns the matching lines."""
    deadline = time.monotonic() + timeout
    while True:
        found = log_matches(log, pattern)
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: no log line /{pattern}/ within {timeout}s:\n{tail(log)}")
        await anyio.sleep(0.05)
