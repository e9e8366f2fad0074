"""What every scenario shares: repeated runs, median and spread, ratios to a baseline measured
in the same run, a printed table and ``results.json``."""

from __future__ import annotations

import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import rocketha
from rocketha import Broker, BrokerConfig, BrokerRole

from benches.peers import rocketmq


class Skipped(Exception):
    """Raised by a scenario that cannot run here; the message says why and how to fix it."""


def peer_rocketmq(needs: str = "the peer RocketMQ is Java") -> rocketmq.RocketMQ:
    """The pinned RocketMQ 5 a scenario runs beside; :class:`Skipped`, saying what to install,
    when Java or Maven is missing (``needs`` says why the scenario wants them) or the jars do
    not resolve."""
    why = rocketmq.missing_tools()
    if why:
        raise Skipped(f"{needs}: {why}")
    try:
        return rocketmq.RocketMQ.resolve(rocketmq.VERSION_5)
    except rocketmq.Unavailable as e:
        raise Skipped(f"the peer RocketMQ does not resolve: {e}") from None


#: Figures a scenario that did run could not measure, by "scenario: figure" -> why; the runner
#: reports them with the skipped scenarios (``results.json`` ``skipped``).
SKIPPED_FIGURES: dict[str, str] = {}


def skip_figure(scenario: str, figure: str, why: str) -> None:
    """Records that ``figure`` of a running ``scenario`` is left out, and why."""
    SKIPPED_FIGURES[f"{scenario}: {figure}"] = why


def native_baselines() -> ModuleType:
    """The baselines that need native speed (mmap memcpy, loopback TCP): the small PyO3 crate in
    ``benches/baseline``, which rocketha does not ship. Installed into this interpreter with pip
    the first time a scenario needs it (``make install`` installs it too)."""
    try:
        return importlib.import_module("rocketha_bench_baseline")
    except ModuleNotFoundError:
        pass
    crate = Path(__file__).resolve().parent / "baseline"
    command = [sys.executable, "-m", "pip", "install", "--quiet", str(crate)]
    print(f"building the native baselines: {' '.join(command)}", file=sys.stderr)
    if subprocess.run(command).returncode != 0:
        raise RuntimeError(f"could not build the native baselines in {crate} (see pip's output)")
    importlib.invalidate_caches()
    return importlib.import_module("rocketha_bench_baseline")


@dataclass
class Figure:
    """One measured figure, beside its baseline from the same run."""

    scenario: str
    name: str
    unit: str
    runs: list[float]
    baseline_name: str | None = None
    baseline_runs: list[float] = field(default_factory=list)
    #: True when bigger is better (throughput), False for latencies.
    higher_is_better: bool = True
    target: str | None = None
    #: Raw data for the plots, by name: latency quantiles (``latency_us``, ``baseline_latency_us``
    #: for CDFs) or a time series (``t_s`` with ``lag_bytes``), from one representative run.
    series: dict[str, list[float]] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def spread(self) -> float:
        return (max(self.runs) - min(self.runs)) / 2 if len(self.runs) > 1 else 0.0

    @property
    def baseline(self) -> float | None:
        return statistics.median(self.baseline_runs) if self.baseline_runs else None

    @property
    def ratio(self) -> float | None:
        """ours / baseline; for latencies baseline-relative cost (ours / baseline) as well."""
        b = self.baseline
        return self.median / b if b else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(median=self.median, spread=self.spread, baseline=self.baseline, ratio=self.ratio)
        return d


def machine() -> dict:
    def version(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return "unknown"

    return {
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "rustc": version(["rustc", "--version"]),
        "rocketha": rocketha.__version__,
        "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def print_table(figures: list[Figure]) -> None:
    head = ("scenario", "figure", "median", "±", "unit", "baseline", "ratio", "target")
    rows = [
        (
            f.scenario,
            f.name,
            fmt(f.median),
            fmt(f.spread),
            f.unit,
            f"{f.baseline_name}: {fmt(f.baseline)}" if f.baseline_name else "-",
            fmt(f.ratio),
            f.target or "",
        )
        for f in figures
    ]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def write_results(out: Path, figures: list[Figure], skipped: dict[str, str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(
        json.dumps(
            {
                "machine": machine(),
                "figures": [f.as_dict() for f in figures],
                "skipped": skipped,
            },
            indent=2,
        )
    )
    return path


def run_threads(target: Callable[[int], object], count: int) -> float:
    """Runs ``target(i)`` on ``count`` threads at once; seconds until the last one ends."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def cdf_points(seconds: list[float], points: int = 1000) -> list[float]:
    """Latencies in us at ``points`` evenly spaced quantiles: enough for a CDF plot, while a
    full sample of every put would bloat ``results.json``."""
    s = sorted(seconds)
    return [s[min(len(s) - 1, i * len(s) // points)] * 1e6 for i in range(points + 1)]


def broker_pair(root: Path, role: str) -> tuple[Broker, Broker]:
    """A started master with ``role`` and a SLAVE of it under ``root``, the slave connected."""
    common: dict[str, Any] = dict(
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        mapped_file_size_commit_log=1 << 30,
    )
    master = Broker(
        BrokerConfig(broker_role=BrokerRole(role), store_path_root_dir=str(root / "m"), **common)
    ).start()
    slave = Broker(
        BrokerConfig(
            broker_role=BrokerRole.SLAVE,
            broker_id=1,
            store_path_root_dir=str(root / "s"),
            ha_master_address=master.ha_address,
            **common,
        )
    ).start()
    assert master.ha is not None
    master.ha.wait_for_state(None, "TRANSFER", 30)
    while not master.ha.slave_ack_offsets():
        time.sleep(0.01)
    return master, slave
