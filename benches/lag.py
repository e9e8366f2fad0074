"""How far an ASYNC_MASTER's slave trails under sustained put load.

One producer thread puts 1 KiB messages as fast as it can for 60 s (or until the master holds a
quarter of the free disk, as master and slave each write everything) while the slave's lag
(master max offset - slave ack offset) is sampled every 100 ms; the lag in ms is
estimated as lag bytes / the put rate of the last second. The sustained period is cut into
``runs`` equal windows, and the windows are the repetitions, since a restart would measure the
ramp-up instead of the steady state. Lag in ms is set against the loopback round trip measured
in the same run: the least any acknowledged replication can trail; the put rate against a raw
loopback TCP copy, to show how hard the load pushed.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from rocketha import Message, _children

from benches.common import Figure, broker_pair, native_baselines, percentile

SAMPLE_EVERY = 0.1
RATE_WINDOW = 10  # samples: the put rate is measured over the last second
TCP_COPY = 64 << 20


def run(quick: bool, runs: int) -> list[Figure]:
    baseline = native_baselines()
    duration = 10 if quick else 60
    rtt = [percentile(baseline.tcp_ping_pong(2000), 0.5) * 1e3 for _ in range(runs)]
    tcp = [TCP_COPY / baseline.tcp_copy(TCP_COPY, 32 * 1024) / 1e6 for _ in range(runs)]
    t_s: list[float] = []
    heads: list[int] = []
    lag_bytes: list[int] = []
    with _children.temp_run_dir("bench-lag") as d:
        budget = shutil.disk_usage(d).free // 4
        master, slave = broker_pair(Path(d), "ASYNC_MASTER")
        assert master.ha is not None
        stop = threading.Event()

        def produce() -> None:
            msg = Message("BenchTopic", b"l" * 1024)
            while not stop.is_set() and master.max_offset < budget:
                for _ in range(1000):
                    master.put(msg)

        producer = threading.Thread(target=produce, name="bench-lag-producer")
        try:
            started = time.perf_counter()
            producer.start()
            for i in range(1, int(duration / SAMPLE_EVERY) + 1):
                time.sleep(max(0.0, started + i * SAMPLE_EVERY - time.perf_counter()))
                if not producer.is_alive():
                    break
                head = master.max_offset
                acks = master.ha.slave_ack_offsets()
                t_s.append(time.perf_counter() - started)
                heads.append(head)
                lag_bytes.append(max(0, head - max(acks, default=0)))
        finally:
            stop.set()
            producer.join()
            slave.shutdown()
            master.shutdown()
    lag_ms = []
    for i, lag in enumerate(lag_bytes):
        j = max(0, i - RATE_WINDOW)
        rate = (heads[i] - heads[j]) / (t_s[i] - t_s[j]) if i > j else 0.0
        lag_ms.append(lag / rate * 1e3 if rate else 0.0)
    window = len(lag_bytes) // runs
    cuts = [slice(k * window, (k + 1) * window) for k in range(runs)]
    series = {"t_s": t_s, "lag_bytes": [float(x) for x in lag_bytes], "lag_ms": lag_ms}
    put_rate = [(heads[c][-1] - heads[c][0]) / (t_s[c][-1] - t_s[c][0]) / 1e6 for c in cuts]
    figs = [
        Figure(
            "lag",
            f"slave lag {q} (ms, est.), {round(t_s[-1])} s load",
            "ms",
            [percentile(lag_ms[c], v) for c in cuts],
            "loopback round trip",
            rtt,
            higher_is_better=False,
            series=series if q == "p50" else {},
        )
        for q, v in (("p50", 0.5), ("p99", 0.99))
    ]
    figs.append(Figure("lag", "sustained put rate", "MB/s", put_rate, "raw TCP copy", tcp))
    return figs
