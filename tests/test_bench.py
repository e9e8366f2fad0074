"""The benchmark harness end to end: ``rocketha bench --quick`` on cheap scenarios writes a
complete ``results.json`` and its plots, and reports unavailable scenarios as skipped. No timing
is asserted: the figures depend on the machine."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rocketha.cli import main

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not (REPO / "benches" / "__main__.py").is_file(), reason="needs a repository checkout"
)


def test_quick_run_writes_results_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "ROCKETHA_REDIS_SERVER": str(tmp_path / "missing" / "redis-server")}
    env.pop("ROCKETHA_BENCHES", None)
    scenarios = ["seed-python", "sync-put", "peer-redis", "hostile"]
    options = ["--quick", "--runs", "1", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "rocketha", "bench", *scenarios, *options],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    results = json.loads((out / "results.json").read_text())
    assert {"cores", "kernel", "python", "rustc", "rocketha"} <= results["machine"].keys()
    figures = results["figures"]
    assert {f["scenario"] for f in figures} == {"seed-python", "sync-put", "hostile"}
    fields = {"scenario", "name", "unit", "runs", "median", "spread", "baseline_name"}
    fields |= {"baseline_runs", "baseline", "ratio", "higher_is_better", "target", "series"}
    for f in figures:
        assert fields <= f.keys(), f
        assert len(f["runs"]) == 1
        assert f["baseline_name"], f"{f['name']} has no same-run baseline"
        assert 0 < f["ratio"] < math.inf, f

    skipped = results["skipped"]
    assert set(skipped) == {"peer-redis"}
    assert "ROCKETHA_REDIS_SERVER" in skipped["peer-redis"]
    assert "apt-get install redis-server" in skipped["peer-redis"]

    for plot in ("throughput.png", "latency_cdf.png"):
        assert (out / plot).read_bytes().startswith(b"\x89PNG"), plot


def test_native_baselines_run(tmp_path: Path) -> None:
    """Every baseline of the separate ``benches/baseline`` crate runs (built on first use)."""
    check = """
import sys
from benches.common import native_baselines
b, d = native_baselines(), sys.argv[1]
assert b.mmap_memcpy(d, bytes(1000), 1 << 20) > 0
assert b.tcp_copy(1 << 20, 4096) > 0
assert b.tcp_copy_to_file(d, 1 << 20, 4096) > 0
assert len(b.tcp_ping_pong(10)) == 10
assert b.PingPong().round_trip() > 0
"""
    proc = subprocess.run(
        [sys.executable, "-c", check, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bench_outside_a_checkout_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROCKETHA_BENCHES", raising=False)
    assert main(["bench", "--quick"]) == 2
    assert "ROCKETHA_BENCHES" in capsys.readouterr().err


def test_remoting_and_peers_without_their_tools_are_skipped_saying_what_to_install(
    tmp_path: Path,
) -> None:
    """The remoting scenario's load generator is Rust (``benches/loadgen``, built with cargo on
    first use), the peers scenario's peers are Java: without ``cargo`` and ``java`` each is
    reported skipped, not failed (a full run takes minutes, so the smoke test above leaves
    them out)."""
    out = tmp_path / "results"
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    env.pop("ROCKETHA_BENCHES", None)
    options = ["--quick", "--runs", "1", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "benches", "remoting", "peers", *options],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    skipped = json.loads((out / "results.json").read_text())["skipped"]
    assert "cargo" in skipped["remoting"] and "rustup.rs" in skipped["remoting"]
    assert "java" in skipped["peers"] and "apt-get install" in skipped["peers"], skipped
