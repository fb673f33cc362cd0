"""bench/perf_threads.py, the profile summary docs/benchmarks.md quotes: it
charges each `perf script` sample to its thread and to the object its leaf
frame runs in (an inlined leaf to the next real frame's object)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Wf, toml_config

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "perf_threads.py"

# Four samples as `perf script -F comm,ip,sym,dso` prints them.
PERF_SCRIPT = """\
tokio-rt-worker 
\t          aa046a wf_host::handler::call_tool (/opt/wf/wf)
\t          a934d4 tokio::runtime::task::poll (/opt/wf/wf)

tokio-rt-worker 
\t          12ab mi_malloc (inlined)
\t          12ab serde_json::de::from_trait (/opt/wf/plugins/libwf_source_mcp.so)

wf-plugin 
\t ffffffff81000000 finish_task_switch.isra.0 ([kernel.kallsyms])
\t          7b7410 mio::poll (/opt/wf/plugins/libwf_source_mcp.so)

wf-plugin 
\t          7b7410 epoll_wait (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        input=PERF_SCRIPT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_samples_are_charged_to_thread_and_leaf_object() -> None:
    rows = {line for line in run().splitlines() if line.startswith("| ") and "---" not in line}
    assert rows == {
        "| thread | code | samples | share |",
        "| tokio-rt-worker | wf | 1 | 25.0% |",
        "| tokio-rt-worker | libwf_source_mcp.so | 1 | 25.0% |",
        "| wf-plugin | kernel | 1 | 25.0% |",
        "| wf-plugin | libc.so | 1 | 25.0% |",
    }
    assert "4 samples." in run()


def test_a_cpu_per_call_scales_the_shares() -> None:
    out = run("400")
    assert "| thread | code | samples | µs/call |" in out
    assert "| wf-plugin | kernel | 1 | 100 |" in out


DRIVER = SCRIPT.parent / "drive_stdio.py"


def test_the_profile_driver_calls_a_real_server_and_prices_its_calls(fixture_upstream_bin: Path) -> None:
    """bench/drive_stdio.py against the Rust fixture: its pid first, then
    calls made and CPU per call (schedstat is read, so it is above zero)."""
    done = subprocess.run(
        [sys.executable, str(DRIVER), "--tool", "echo", "--seconds", "0.5", "--warm", "5", "--", str(fixture_upstream_bin)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("pid ") and int(lines[0].split()[1]) > 0, done.stdout
    words = lines[-1].split()
    assert words[0] == "calls" and int(words[1]) > 0, done.stdout
    assert float(words[words.index("CPU") + 1]) > 0, done.stdout


def test_the_profile_driver_fails_on_an_unknown_tool(fixture_upstream_bin: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(DRIVER), "--tool", "no_such_tool", "--seconds", "0.2", "--", str(fixture_upstream_bin)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "tools/call failed" in done.stderr, done.stderr


STACKS = SCRIPT.parent / "perf_stacks.py"


def test_stack_shares_count_samples_under_code_and_exclude_what_is_asked() -> None:
    """bench/perf_stacks.py on the four samples above: a pattern matches a
    frame's symbol or its object; `!` drops samples that also match the rest."""
    done = subprocess.run(
        [sys.executable, str(STACKS), "--per-call", "400", "tokio|mio", "tokio!call_tool", "libwf_source_mcp", "nothing"],
        input=PERF_SCRIPT,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {line for line in done.stdout.splitlines() if line.startswith("| `")}
    assert rows == {
        "| `tokio|mio` | 2 | 50.0% | 200 |",
        "| `tokio!call_tool` | 0 | 0.0% | 0 |",
        "| `libwf_source_mcp` | 2 | 50.0% | 200 |",
        "| `nothing` | 0 | 0.0% | 0 |",
    }, done.stdout
    assert "4 samples." in done.stdout
    empty = subprocess.run([sys.executable, str(STACKS), "x"], input="", capture_output=True, text=True)
    assert empty.returncode != 0 and "no samples" in empty.stderr


HTTP_DRIVER = SCRIPT.parent / "drive_http.py"


@pytest.mark.parametrize("generation", ["2025", "2026"])
def test_the_http_driver_calls_wf_serve_http_and_prices_its_calls(
    wf: Wf, fixture_upstream_bin: Path, generation: str
) -> None:
    """bench/drive_http.py against `wf serve --http` before the Rust fixture, as
    a 2025-11-25 session client and as a stateless 2026-07-28 one."""
    config = wf.write_config(toml_config({"fx": {"command": str(fixture_upstream_bin)}}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    done = subprocess.run(
        [sys.executable, str(HTTP_DRIVER), "--url", server.url, "--tool", "fx__echo", "--generation", generation,
         "--pid", str(server.proc.pid), "--seconds", "0.5", "--warm", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    words = done.stdout.split()
    assert words[0] == "calls" and int(words[1]) > 0, done.stdout
    assert float(words[words.index("CPU") + 1]) > 0, done.stdout
    wrong = subprocess.run(
        [sys.executable, str(HTTP_DRIVER), "--url", server.url, "--tool", "fx__nope", "--generation", generation,
         "--seconds", "0.2", "--warm", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode != 0 and "tools/call" in wrong.stderr, wrong.stderr


CACHE_SIM = SCRIPT.parent / "cache_sim.py"

# Two callgrind files (`--dump-instr=yes --dump-line=no`, compressed names,
# relative positions) of one server: after a short and after a longer run.
CALLGRIND = """\
# callgrind format
version: 1
positions: instr
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim

ob=(1) /opt/wf/wf
fl=(1) ???
fn=(1) wf_host::server::handler::call
0x1000 {a} 0 0 {im} 0 0 {lm}
+0x40 {a}
calls=3 0x2000
+8 9999 9999 9999 9999
ob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
fn=(2) __memcpy_avx_unaligned_erms
0x2000 {m}
ob=(3) /opt/wf/libwf_source_mcp.so
fn=(3) <&mut serde_json::de::Deserializer<R> as serde_core::de::Deserializer>::deserialize_struct
0x5000 {a} 0 0 0 0 0 0 0 0 0 {bm}
"""


def load_cache_sim():
    import importlib.util

    spec = importlib.util.spec_from_file_location("cache_sim", CACHE_SIM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cache_simulation_reads_callgrind_per_call_by_object_and_code_line(tmp_path: Path) -> None:
    """bench/cache_sim.py's reader: self cost by object (a call's inclusive
    cost is not charged to its caller), memcpy apart, and the 64-byte code
    lines that run on every call, by crate, from two runs' difference."""
    cs = load_cache_sim()
    short, long = tmp_path / "a.out", tmp_path / "b.out"
    short.write_text(CALLGRIND.format(a=100, im=10, lm=2, m=50, bm=1))
    # 10 more calls: each line of wf's and the plugin's runs 3 instructions a
    # call (30 more), memcpy 7 bytes a call; one L1i and one L2 code miss a call.
    long.write_text(CALLGRIND.format(a=130, im=20, lm=12, m=120, bm=21))
    objects, hot, memcpy = cs.per_call(cs.Profile(short), cs.Profile(long), 10)
    E = cs.E
    assert objects["wf"][E["Ir"]] == 6.0  # two lines, 3 each; the call line's 9999 left out
    assert objects["wf"][E["I1mr"]] == 1.0 and objects["wf"][E["ILmr"]] == 1.0
    assert objects["libwf_source_mcp.so"][E["Bcm"]] == 2.0
    assert objects["libc.so.6"][E["Ir"]] == 7.0 and memcpy == 7.0
    lines = sorted((cs.short(ob), line, crate) for ob, line, crate in hot)
    # wf's two lines (0x1000, 0x1040) are distinct 64-byte lines; memcpy's 7
    # a call is above 0.9 instructions a call too.
    assert lines == [
        ("libc.so.6", 0x2000 >> 6, "libc"),
        ("libwf_source_mcp.so", 0x5000 >> 6, "serde_json"),
        ("wf", 0x1000 >> 6, "wf_host"),
        ("wf", 0x1040 >> 6, "wf_host"),
    ]


def test_the_cache_simulation_names_a_run_that_fails(tmp_path: Path) -> None:
    """A server that cannot start fails the script with the log to read, not a
    table of zeros."""
    done = subprocess.run(
        [sys.executable, str(CACHE_SIM), "--only", "wf", "--wf-dir", str(tmp_path), "--keep", str(tmp_path / "k")],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "wf: the run with 200 calls failed" in done.stderr, done.stderr
