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


def bench(module: str, *args: str, env: dict[str, str], timeout: float) -> str:
    """``python -m MODULE ARGS`` from the checkout, which must succeed; returns its stdout."""
    env = {k: v for k, v in env.items() if k != "ROCKETHA_BENCHES"}
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_quick_run_writes_results_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "ROCKETHA_REDIS_SERVER": str(tmp_path / "missing" / "redis-server")}
    scenarios = ["seed-python", "sync-put", "peer-redis", "hostile"]
    options = ["--quick", "--runs", "1", "--out", str(out)]
    bench("rocketha", "bench", *scenarios, *options, env=env, timeout=300)

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
    options = ["--quick", "--runs", "1", "--out", str(out)]
    bench("benches", "remoting", "peers", *options, env=env, timeout=120)
    skipped = json.loads((out / "results.json").read_text())["skipped"]
    assert "cargo" in skipped["remoting"] and "rustup.rs" in skipped["remoting"]
    assert "java" in skipped["peers"] and "apt-get install" in skipped["peers"], skipped


def test_soak_delivers_everything_within_its_memory_and_fd_bounds(tmp_path: Path) -> None:
    """The soak scenario for 30 s (its CI length): name server, SYNC_MASTER and SLAVE, two
    producers and two consumers, all processes. Checked: no acked message undelivered, the
    brokers' anonymous RSS and open fds within the stated bounds; no latency bound."""
    out = tmp_path / "results"
    options = ["--quick", "--duration", "30", "--out", str(out)]
    stdout = bench("rocketha", "bench", "soak", *options, env=dict(os.environ), timeout=600)
    figures = {f["name"]: f for f in json.loads((out / "results.json").read_text())["figures"]}
    assert figures["acked messages"]["median"] > 0
    assert figures["acked messages never delivered"]["median"] == 0, stdout
    growth = [f for name, f in figures.items() if name.endswith("growth after warm-up")]
    assert len(growth) == 4, list(figures)
    for f in growth:
        # The bound the scenario states, as its target "<= N".
        assert f["median"] <= float(f["target"].removeprefix("<= ")), f
    series = figures["send latency p50, median of the seconds"]["series"]
    assert len(series["t_s"]) >= 25 and len(series["master_fds"]) == len(series["t_s"])
    assert (out / "soak.png").read_bytes().startswith(b"\x89PNG")
    assert "every bound held" in stdout


@pytest.mark.interop
def test_failover_measures_both_systems_and_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """``rocketha bench failover --quick --runs 1``: one SIGKILL of the master of Apache
    RocketMQ 5.4.0's controller-mode group and one of rocketha's, under the same controllers
    and the same Java producer. The bench itself fails (exit 1) if a SEND_OK message is
    missing from the new master; here both systems' figures must be there."""
    out = tmp_path / "results"
    options = ["--quick", "--runs", "1", "--out", str(out)]
    stdout = bench("rocketha", "bench", "failover", *options, env=dict(os.environ), timeout=900)
    results = json.loads((out / "results.json").read_text())
    if "failover" in results["skipped"]:
        pytest.skip(results["skipped"]["failover"])
    names = {f["name"] for f in results["figures"]}
    for system in ("RocketMQ 5.4.0", "rocketha"):
        kill_to_ok = f"{system}: SIGKILL of the master to the first SEND_OK on the new master p50"
        assert kill_to_ok in names, names
        assert f"{system}: lost: 0 of " in stdout, stdout
    against = "SIGKILL of the master to the first SEND_OK on the new master p50, against"
    assert any(n.startswith(f"rocketha: {against}") for n in names), names
    sends = [f for f in results["figures"] if f["unit"] == "msg/s"]
    assert len(sends) == 2 and all(f["median"] > 0 for f in sends), sends
    assert any(f["name"].startswith("rocketha: ") and f["baseline"] > 0 for f in sends), sends


def test_scale_steps_measure_every_figure(tmp_path: Path) -> None:
    """``bench scale``'s steps against rocketha, small: topics (route lookups, the table's
    fetch, a slave's sync of an unchanged table, the name server's registrations from the
    probe broker), groups, then clients held open as push consumers heartbeating. RocketMQ's
    side is the same code against its processes, run on request."""
    from benches import remoting, scale

    with remoting.rocketha_pair(tmp_path, "ASYNC_MASTER") as servers:
        topics, groups, clients = scale._grow(servers, [40, 80], [30], "T", connections=(5, 10))
        cluster = scale.wire.call(servers.namesrv, scale.GET_BROKER_CLUSTER_INFO).body.decode()
    assert [t["topics"] for t in topics] == [40, 80]
    assert all(value > 0 for step in topics + groups + clients for value in step.values())
    assert topics[1]["table_bytes"] > topics[0]["table_bytes"]
    assert [g["groups"] for g in groups] == [30]
    assert [c["connections"] for c in clients] == [5, 10]
    assert clients[1]["master_fds"] >= clients[0]["master_fds"] + 5
    assert "bench-a" in cluster and scale.PROBE["brokerName"] not in cluster, "unregistered"


def test_table_tier_replication_runs_both_ways_and_the_table_holds_every_message(
    tmp_path: Path,
) -> None:
    """``bench table-tier``'s replication with the slave's tier off and on, small: the run
    itself fails unless the table ends up with every message once."""
    pytest.importorskip("deltalake")
    from benches import table_tier

    off = table_tier._replicate(tmp_path / "off", 4000, tier=False)
    on = table_tier._replicate(tmp_path / "on", 4000, tier=True)
    assert off > 0 and on > 0
    table = table_tier.open_table(str(tmp_path / "on" / "table"))
    assert table is not None and table.to_pyarrow_dataset().count_rows() == 4000
    assert table_tier._build_rate(tmp_path / "on" / "s", tmp_path / "rebuilt") > 0
