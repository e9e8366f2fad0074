"""Soak (issue 15, Load): ``rocketha namesrv`` and a SYNC_MASTER + SLAVE ``rocketha broker``
pair as processes, loaded for ``--duration`` seconds (default 600; ``--quick`` 30) by two
producer processes at half the measured peak and drained by a group of two consumer processes
(``benches/clients.py``).

The peak is measured first in the same run: the same two producers unpaced for a few seconds
(or taken from ``--rate``, acked sends/s in total). Every second the harness samples the
master's and the slave's RSS and anonymous RSS (``/proc/PID/status``: the commit log is
mmap'd, so its pages count in RSS as they are touched; a leak shows in the anonymous part) and
open file descriptors (``/proc/PID/fd``), the send latency p50/p99 of the sends answered in that
second, and the consumers' lag (acked - delivered). At the end, with the producers stopped and
the consumers drained, it checks and prints:

* every acknowledged (SEND_OK) message was delivered, duplicates counted;
* anonymous RSS growth of each broker after the warm-up (the first sixth of the run, at least
  5 s) at most ``RSS_GROWTH_MIB``; open fds at most the warm-up's + ``FD_GROWTH``.

``soak.png`` plots the latency percentiles, RSS and fds over time.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from rocketha import _children

from benches.clients import ConsumerClient, ProducerClient
from benches.common import Figure, percentile
from benches.remoting import rocketha_pair

TOPIC, PEAK_TOPIC, GROUP = "Soak", "SoakPeak", "soak-consumers"
PRODUCERS = CONSUMERS = 2
#: The bounds the soak checks (anonymous memory in MiB, descriptors in count).
RSS_GROWTH_MIB = 32
FD_GROWTH = 8
SAMPLE_EVERY = 1.0


def _status(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``RssAnon`` of ``pid`` in MiB, and its open descriptors."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                values[key] = int(rest.split()[0]) / 1024
    return {
        "rss": values["VmRSS"],
        "anon": values["RssAnon"],
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def _peak(root: Path, namesrv: str, seconds: float) -> float:
    """Acked sends/s of the producers unpaced, counted after their first second."""
    producers = [
        ProducerClient(root / f"peak{i}.log", namesrv, PEAK_TOPIC, f"peak{i}")
        for i in range(PRODUCERS)
    ]
    try:
        _wait(lambda: all(p.acked() for p in producers), "the peak producers' first acks")
        time.sleep(1.0)  # warm-up: routes, connections, the topic's creation
        start = time.monotonic()
        counted = sum(len(p.acked()) for p in producers)
        time.sleep(seconds)
        return (sum(len(p.acked()) for p in producers) - counted) / (time.monotonic() - start)
    finally:
        for p in producers:
            p.stop()


def _wait(predicate: Callable[[], bool], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"soak: timed out waiting for {what}")
        time.sleep(0.05)


def run(
    quick: bool, runs: int, *, duration: float | None = None, rate: float | None = None
) -> list[Figure]:
    duration = duration or (30.0 if quick else 600.0)
    warmup = max(5.0, duration / 6)
    with (
        _children.temp_run_dir("bench-soak") as root,
        rocketha_pair(root, "SYNC_MASTER") as servers,
    ):
        peak = _peak(root, servers.namesrv, 3.0 if quick else 10.0)
        target = rate if rate else peak / 2
        series, outcome = _soak(root, servers.namesrv, servers.pids, target, duration, warmup)
    return _figures(series, outcome, peak, target, warmup)


def _soak(
    root: Path, namesrv: str, pids: dict[str, int], target: float, duration: float, warmup: float
) -> tuple[dict[str, list[float]], dict[str, float]]:
    each = f"--rate={target / PRODUCERS}"
    producers = [
        ProducerClient(root / f"producer{i}.log", namesrv, TOPIC, f"p{i}", each)
        for i in range(PRODUCERS)
    ]
    consumers: list[ConsumerClient] = []
    per_broker = [f"{b}_{m}" for b in ("master", "slave") for m in ("rss_mib", "anon_mib", "fds")]
    keys = ["t_s", "p50_ms", "p99_ms", "acked_per_s", "lag_msgs", *per_broker]
    series: dict[str, list[float]] = {k: [] for k in keys}
    try:
        _wait(lambda: all(p.acked() for p in producers), "the first acks")
        consumers = [
            ConsumerClient(root / f"consumer{i}.log", namesrv, GROUP, TOPIC, "--commit-interval=1")
            for i in range(CONSUMERS)
        ]
        _wait(lambda: all(c.ready for c in consumers), "the consumers to subscribe")
        seen = [0] * PRODUCERS
        #: Keys delivered so far, grown by what each consumer printed since the last sample.
        delivered: set[str] = set()
        read = [0] * CONSUMERS
        started = time.monotonic()
        acked_before = 0
        for i in range(1, int(duration / SAMPLE_EVERY) + 1):
            time.sleep(max(0.0, started + i * SAMPLE_EVERY - time.monotonic()))
            latencies = []
            acked = 0
            for j, p in enumerate(producers):
                sends = p.sends[:]
                latencies += [lat for _, status, lat, _ in sends[seen[j] :] if status == "SEND_OK"]
                seen[j] = len(sends)
                acked += sum(1 for _, status, _, _ in sends if status == "SEND_OK")
            for j, c in enumerate(consumers):
                keys = c.keys[read[j] :]
                delivered.update(keys)
                read[j] += len(keys)
            series["t_s"].append(time.monotonic() - started)
            series["p50_ms"].append(percentile(latencies, 0.5) / 1e3 if latencies else 0.0)
            series["p99_ms"].append(percentile(latencies, 0.99) / 1e3 if latencies else 0.0)
            series["acked_per_s"].append((acked - acked_before) / SAMPLE_EVERY)
            series["lag_msgs"].append(max(0, acked - len(delivered)))
            acked_before = acked
            for name in ("master", "slave"):
                s = _status(pids[name])
                series[f"{name}_rss_mib"].append(s["rss"])
                series[f"{name}_anon_mib"].append(s["anon"])
                series[f"{name}_fds"].append(s["fds"])
    finally:
        for p in producers:
            p.stop()
    acked_keys = {k for p in producers for k in p.acked()}
    try:
        _wait(
            lambda: acked_keys <= {k for c in consumers for k in c.keys},
            "the consumers to drain",
            seconds=300,
        )
    except RuntimeError as e:
        print(e)
    finally:
        for c in consumers:
            c.stop()
    counts = Counter(k for c in consumers for k in c.keys)
    outcome = {
        "acked": len(acked_keys),
        "undelivered": len(acked_keys - counts.keys()),
        "duplicates": sum(n - 1 for n in counts.values()),
    }
    return series, outcome


def _growth(values: list[float], t_s: list[float], warmup: float) -> float:
    """The rise of ``values`` after the warm-up over their value when it ended."""
    after = [v for v, t in zip(values, t_s, strict=True) if t >= warmup]
    return max(after) - after[0] if after else 0.0


def _figures(
    series: dict[str, list[float]],
    outcome: dict[str, float],
    peak: float,
    target: float,
    warmup: float,
) -> list[Figure]:
    t = series["t_s"]
    steady = [v for v, ts in zip(series["acked_per_s"], t, strict=True) if ts >= warmup]
    figs = [
        Figure(
            "soak",
            f"acked sends/s at half the peak, {round(t[-1])} s",
            "msg/s",
            [sum(steady) / len(steady) if steady else 0.0],
            "the target: half the measured peak",
            [target],
            target=f"peak {peak:,.0f}/s",
        ),
    ]
    for q in ("p50", "p99"):
        values = [v for v, ts in zip(series[f"{q}_ms"], t, strict=True) if ts >= warmup]
        figs.append(
            Figure(
                "soak",
                f"send latency {q}, median of the seconds",
                "ms",
                [sorted(values)[len(values) // 2] if values else 0.0],
                higher_is_better=False,
                series=series if q == "p50" else {},
            )
        )
    for name in ("master", "slave"):
        for what, key, unit, bound in (
            ("anonymous RSS", "anon_mib", "MiB", RSS_GROWTH_MIB),
            ("open fd", "fds", "fds", FD_GROWTH),
        ):
            figs.append(
                Figure(
                    "soak",
                    f"{name} {what} growth after warm-up",
                    unit,
                    [_growth(series[f"{name}_{key}"], t, warmup)],
                    higher_is_better=False,
                    target=f"<= {bound}",
                )
            )
    for key, name in (
        ("acked", "acked messages"),
        ("undelivered", "acked messages never delivered"),
        ("duplicates", "duplicate deliveries"),
    ):
        figs.append(
            Figure(
                "soak",
                name,
                "msgs",
                [float(outcome[key])],
                higher_is_better=key == "acked",
                target="0" if key == "undelivered" else None,
            )
        )
    violated = [
        f.name
        for f in figs
        if (f.unit == "MiB" and f.median > RSS_GROWTH_MIB)
        or (f.unit == "fds" and f.median > FD_GROWTH)
        or (f.name == "acked messages never delivered" and f.median > 0)
    ]
    print("soak: " + (f"VIOLATED: {', '.join(violated)}" if violated else "every bound held"))
    return figs
