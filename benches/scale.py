"""Cost as the number of topics grows (issue 32), rocketha beside Apache RocketMQ 5.4.0.

Each system is a name server and an ASYNC_MASTER + SLAVE pair, as processes. One admin client
creates topics of 8 queues one after the other (``mqadmin updateTopic -c``: the cluster's
masters from the name server, then UPDATE_AND_CREATE_TOPIC to each), and at each step (1k, 5k,
10k and 50k topics; 500, 1k and 2k with ``--quick``) the run measures, on both systems:

* the creation rate over the step's last ``WINDOW`` creations;
* a route lookup at the name server (GET_ROUTEINFO_BY_TOPIC of a random existing topic), p50;
* the whole topic table a broker registers (GET_ALL_TOPIC_CONFIG's body, what the slave syncs
  too), bytes, and the time to fetch it as a slave's sync does;
* the master's and the name server's resident memory and open files.

Then consumer groups (``mqadmin updateSubGroup``), to 1k and 10k (500 and 1k with ``--quick``):
the creation rate over each step's last ``WINDOW``.

RocketMQ stops at 10k (at its rate 50k would take a quarter of an hour); rocketha goes on.
Each figure is a curve: ``series`` holds every step.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from rocketha import _children
from rocketha._core import MQClientAPI
from rocketha.admin import Admin

from benches import remoting
from benches.common import Figure, peer_rocketmq, percentile
from benches.peers import rocketmq, wire

#: Creations each step's rate is measured over.
WINDOW = 200
#: Route lookups per step.
LOOKUPS = 200
QUEUES = 8
#: GET_ALL_TOPIC_CONFIG.
GET_ALL_TOPIC_CONFIG = 21
#: Beyond this many topics RocketMQ is not measured.
ROCKETMQ_MAX = 10_000


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _step(servers: remoting.Servers, made: list[str]) -> dict[str, float]:
    """The figures of one step, after its creations."""
    ns, master = servers.namesrv, servers.address
    pids = {"master": servers.pids["master"], "namesrv": servers.namesrv_pid or 0}
    api = MQClientAPI()
    lookups = []
    try:
        for topic in random.Random(len(made)).choices(made, k=LOOKUPS):
            started = time.perf_counter()
            route = api.get_topic_route_info(ns, topic, 5.0)
            lookups.append(time.perf_counter() - started)
            if route is None:
                raise RuntimeError(f"the name server has no route for {topic}")
    finally:
        api.close()
    started = time.perf_counter()
    table = wire.call(master, GET_ALL_TOPIC_CONFIG, timeout=30.0)
    fetched = time.perf_counter() - started
    return {
        "topics": len(made),
        "lookup_p50_us": percentile(lookups, 0.5) * 1e6,
        "table_bytes": len(table.body),
        "table_fetch_ms": fetched * 1e3,
        "master_rss_mib": _status_kib(pids["master"], "VmRSS") / 1024,
        "namesrv_rss_mib": _status_kib(pids["namesrv"], "VmRSS") / 1024,
        "master_fds": _fds(pids["master"]),
    }


def _creations(
    create: Callable[[str], object], steps: list[int], prefix: str
) -> Iterator[tuple[list[str], float]]:
    """Creates names up to each step with ``create``; at each step, the names so far and
    the rate over the step's last :data:`WINDOW`."""
    made: list[str] = []
    for step in steps:
        while len(made) < step - WINDOW:
            made.append(f"{prefix}{len(made)}")
            create(made[-1])
        started = time.perf_counter()
        while len(made) < step:
            made.append(f"{prefix}{len(made)}")
            create(made[-1])
        yield made, WINDOW / (time.perf_counter() - started)


def _grow(
    servers: remoting.Servers, steps: list[int], group_steps: list[int], prefix: str
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Topics up to each of ``steps``, then groups up to each of ``group_steps``: each
    step's figures."""
    with Admin(servers.namesrv) as admin:
        # A JVM broker is up before it registers.
        deadline = time.monotonic() + 60
        while not admin.masters():
            if time.monotonic() > deadline:
                raise RuntimeError("no master registered with the name server within 60 s")
            time.sleep(0.1)
        topics = [
            {"rate": rate, **_step(servers, made)}
            for made, rate in _creations(lambda t: admin.create_topic(t, QUEUES), steps, prefix)
        ]
        groups = [
            {
                "groups": len(made),
                "rate": rate,
                "master_rss_mib": _status_kib(servers.pids["master"], "VmRSS") / 1024,
            }
            for made, rate in _creations(admin.create_group, group_steps, f"{prefix}g")
        ]
    return topics, groups


Pair = Callable[[], AbstractContextManager[remoting.Servers]]


def _systems(rmq: rocketmq.RocketMQ, root: Path) -> Iterator[tuple[str, Pair]]:
    yield "rocketha", lambda: remoting.rocketha_pair(root / "rocketha", "ASYNC_MASTER")
    yield "rocketmq", lambda: remoting.rocketmq_pair(rmq, root / "rocketmq", "ASYNC_MASTER")


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq()
    steps = [500, 1000, 2000] if quick else [1000, 5000, 10_000, 50_000]
    group_steps = [500, 1000] if quick else [1000, 10_000]
    curves: dict[str, list[list[dict[str, float]]]] = {"rocketha": [], "rocketmq": []}
    group_curves: dict[str, list[list[dict[str, float]]]] = {"rocketha": [], "rocketmq": []}
    for r in range(runs):
        with _children.temp_run_dir("bench-scale") as d:
            for name, pair in _systems(rmq, Path(d) / str(r)):
                mine = steps if name == "rocketha" else [s for s in steps if s <= ROCKETMQ_MAX]
                with pair() as servers:
                    topics, groups = _grow(servers, mine, group_steps, f"Scale{r}_")
                curves[name].append(topics)
                group_curves[name].append(groups)
    return _figures(curves) + _group_figures(group_curves)


def _group_figures(curves: dict[str, list[list[dict[str, float]]]]) -> list[Figure]:
    """Consumer groups created (``mqadmin updateSubGroup``) per second at each step."""
    ours, theirs = curves["rocketha"], curves["rocketmq"]
    return [
        Figure(
            "scale",
            f"consumer groups created/s at {at['groups']:,.0f} groups",
            "groups/s",
            [run[i]["rate"] for run in ours],
            "RocketMQ 5.4.0",
            [run[i]["rate"] for run in theirs],
        )
        for i, at in enumerate(ours[0])
    ]


#: Each step's figures: key, what, unit, whether higher is better, and issue 32's target at
#: 10,000 topics.
FIGURES = (
    ("rate", "topics created/s", "topics/s", True, ">= 1.5"),
    ("lookup_p50_us", "route lookup p50", "us", False, "<= 1"),
    ("table_bytes", "whole topic table", "bytes", False, None),
    ("table_fetch_ms", "whole topic table fetched (a slave's sync)", "ms", False, None),
    ("master_rss_mib", "master RSS", "MiB", False, None),
    ("namesrv_rss_mib", "name server RSS", "MiB", False, None),
    ("master_fds", "master open files", "fds", False, None),
)


def _figures(curves: dict[str, list[list[dict[str, float]]]]) -> list[Figure]:
    """Each step RocketMQ reached, beside it; rocketha's further steps alone; then the
    master's memory per 1,000 topics, first step to last, against RocketMQ's."""
    ours, theirs = curves["rocketha"], curves["rocketmq"]
    figures = []
    for i, at in enumerate(ours[0]):
        n = int(at["topics"])
        for key, what, unit, higher, target in FIGURES:
            peer = [run[i][key] for run in theirs] if i < len(theirs[0]) else []
            figures.append(
                Figure(
                    "scale",
                    f"{what} at {n:,} topics",
                    unit,
                    [run[i][key] for run in ours],
                    "RocketMQ 5.4.0" if peer else None,
                    peer,
                    higher_is_better=higher,
                    target=target if n == ROCKETMQ_MAX and peer else None,
                )
            )

    def per_thousand(run: list[dict[str, float]]) -> float:
        last = run[: len(theirs[0])][-1]
        grown = last["master_rss_mib"] - run[0]["master_rss_mib"]
        return grown / (last["topics"] - run[0]["topics"]) * 1000

    figures.append(
        Figure(
            "scale",
            f"master RSS growth per 1,000 topics, {ours[0][0]['topics']:,.0f} to "
            f"{theirs[0][-1]['topics']:,.0f}",
            "MiB",
            [per_thousand(run) for run in ours],
            "RocketMQ 5.4.0",
            [per_thousand(run) for run in theirs],
            higher_is_better=False,
            target="<= 0.1",
        )
    )
    figures[0].series = {
        f"{name}_{key}": [step[key] for step in runs[0]]
        for name, runs in curves.items()
        for key in ("topics", "rate", "lookup_p50_us", "master_rss_mib")
    }
    return figures
