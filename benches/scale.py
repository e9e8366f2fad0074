"""Cost as the number of topics grows (issue 32), rocketha beside Apache RocketMQ 5.4.0.

Each system is a name server and an ASYNC_MASTER + SLAVE pair, as processes. One admin client
creates topics of 8 queues one after the other (``mqadmin updateTopic -c``: the cluster's
masters from the name server, then UPDATE_AND_CREATE_TOPIC to each), and at each step (1k, 5k,
10k and 50k topics; 500, 1k and 2k with ``--quick``) the run measures, on both systems:

* the creation rate over the step's last ``WINDOW`` creations;
* a route lookup at the name server (GET_ROUTEINFO_BY_TOPIC of a random existing topic), p50;
* the whole topic table a broker registers (GET_ALL_TOPIC_CONFIG's body, what the slave syncs
  too), bytes, and the time to fetch it as a slave's sync does;
* a slave's periodic sync of that table when nothing changed (rocketha's slave names its
  version and takes only what changed since; RocketMQ's takes the whole table);
* the name server's time to take a REGISTER_BROKER of that table: the first (a broker new to
  it) and again (the period's), from a probe broker in a cluster of its own;
* the master's and the name server's resident memory and open files.

Then consumer groups (``mqadmin updateSubGroup``), to 1k and 10k (500 and 1k with ``--quick``):
the creation rate over each step's last ``WINDOW``.

Then clients: 100 and 1,000 connections held open to the master, each a push consumer of its
own group (one of those created) and topic, as HEART_BEAT says: the joins per second (a first
heartbeat, which also creates the group's retry topic), a heartbeat's round trip p50 with every
connection and group there (what each client's 30 s heartbeat costs), the master's memory and
open files.

RocketMQ stops at 10k (at its rate 50k would take a quarter of an hour); rocketha goes on.
Each figure is a curve: ``series`` holds every step.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
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
REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
HEART_BEAT = 34
GET_BROKER_CLUSTER_INFO = 106
#: Registrations timed per step: the first, then the period's.
REGISTRATIONS = 6
#: Who the timed registrations come from: a broker of its own in a cluster of its own, so the
#: real brokers' entries are untouched; unregistered after.
PROBE = {
    "brokerName": "scale-probe",
    "brokerAddr": "127.0.0.1:9",
    "clusterName": "ScaleProbe",
    "brokerId": 0,
}
#: Client connections held open, step by step.
CONNECTIONS = (100, 1000)
#: Heartbeats timed per connection step.
HEARTBEATS = 200


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
    # A slave's periodic sync, nothing changed since: a rocketha slave names its version and
    # takes only what changed; RocketMQ's master answers whole.
    since = {"sinceDataVersion": json.dumps(table.json()["dataVersion"])}
    started = time.perf_counter()
    _check(wire.call(master, GET_ALL_TOPIC_CONFIG, since, timeout=30.0), "the slave's sync")
    synced = time.perf_counter() - started
    first, again = _registration(ns, table.body)
    return {
        "sync_unchanged_ms": synced * 1e3,
        "register_first_ms": first,
        "register_again_ms": again,
        "topics": len(made),
        "lookup_p50_us": percentile(lookups, 0.5) * 1e6,
        "table_bytes": len(table.body),
        "table_fetch_ms": fetched * 1e3,
        "master_rss_mib": _status_kib(pids["master"], "VmRSS") / 1024,
        "namesrv_rss_mib": _status_kib(pids["namesrv"], "VmRSS") / 1024,
        "master_fds": _fds(pids["master"]),
    }


def _check(r: wire.Response, what: str) -> None:
    if r.code != wire.SUCCESS:
        raise RuntimeError(f"{what}: answered code {r.code}: {r.remark}")


def _registration(namesrv: str, table: bytes) -> tuple[float, float]:
    """Milliseconds the name server takes to answer REGISTER_BROKER of ``table`` (a
    TopicConfigSerializeWrapper's JSON), as :data:`PROBE`: the first, and the median again."""
    body = b'{"topicConfigSerializeWrapper":' + table + b',"filterServerList":[]}'
    ext = {**PROBE, "haServerAddr": PROBE["brokerAddr"], "compressed": False, "bodyCrc32": 0}
    times = []
    with wire.Connection(namesrv, timeout=30.0) as conn:
        try:
            for _ in range(REGISTRATIONS):
                started = time.perf_counter()
                r = conn.call(REGISTER_BROKER, ext, body)
                times.append(time.perf_counter() - started)
                _check(r, "the probe's REGISTER_BROKER")
        finally:
            _check(conn.call(UNREGISTER_BROKER, PROBE), "the probe's UNREGISTER_BROKER")
            # RocketMQ 5 unregisters in the background (`BatchUnregistrationService`): the
            # next step's admin would otherwise find the probe among the masters.
            deadline = time.monotonic() + 30
            while PROBE["brokerName"] in conn.call(GET_BROKER_CLUSTER_INFO).body.decode():
                if time.monotonic() > deadline:
                    raise RuntimeError("the name server kept the probe broker for 30 s")
                time.sleep(0.01)
    return times[0] * 1e3, percentile(times[1:], 0.5) * 1e3


def _heartbeat(client: str, group: str, topic: str) -> bytes:
    """HEART_BEAT's body for a push consumer of ``group`` subscribed to all of ``topic``."""
    subscription = {
        "topic": topic,
        "subString": "*",
        "classFilterMode": False,
        "tagsSet": [],
        "codeSet": [],
        "subVersion": 1,
        "expressionType": "TAG",
    }
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [subscription],
        "unitMode": False,
    }
    body = {"clientID": client, "producerDataSet": [], "consumerDataSet": [consumer]}
    return json.dumps(body).encode()


def _clients(
    servers: remoting.Servers, topics: list[str], groups: list[str], connections: Sequence[int]
) -> list[dict[str, float]]:
    """Connections to the master up to each of ``connections``, each a client of its own
    group and topic; each step's figures."""
    held: list[tuple[wire.Connection, bytes]] = []
    steps = []
    pid = servers.pids["master"]
    try:
        for step in connections:
            started, before = time.perf_counter(), len(held)
            while len(held) < step:
                i = len(held)
                body = _heartbeat(f"scale-client-{i}", groups[i % len(groups)], topics[i])
                held.append((wire.Connection(servers.address, timeout=30.0), body))
                _check(held[-1][0].call(HEART_BEAT, body=body), "a first HEART_BEAT")
            joins = (step - before) / (time.perf_counter() - started)
            beats = []
            for conn, body in random.Random(step).choices(held, k=HEARTBEATS):
                started = time.perf_counter()
                _check(conn.call(HEART_BEAT, body=body), "HEART_BEAT")
                beats.append(time.perf_counter() - started)
            steps.append(
                {
                    "connections": step,
                    "join_rate": joins,
                    "heartbeat_p50_us": percentile(beats, 0.5) * 1e6,
                    "master_rss_mib": _status_kib(pid, "VmRSS") / 1024,
                    "master_fds": _fds(pid),
                }
            )
    finally:
        for conn, _ in held:
            conn.close()
    return steps


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


Curve = list[dict[str, float]]


def _grow(
    servers: remoting.Servers,
    steps: list[int],
    group_steps: list[int],
    prefix: str,
    connections: Sequence[int] = CONNECTIONS,
) -> tuple[Curve, Curve, Curve]:
    """Topics up to each of ``steps``, then groups up to each of ``group_steps``, then
    clients: each step's figures."""
    with Admin(servers.namesrv) as admin:
        # A JVM broker is up before it registers.
        deadline = time.monotonic() + 60
        while not admin.masters():
            if time.monotonic() > deadline:
                raise RuntimeError("no master registered with the name server within 60 s")
            time.sleep(0.1)
        topic_names: list[str] = []
        topics = []
        for topic_names, rate in _creations(lambda t: admin.create_topic(t, QUEUES), steps, prefix):
            topics.append({"rate": rate, **_step(servers, topic_names)})
        group_names: list[str] = []
        groups = []
        for group_names, rate in _creations(admin.create_group, group_steps, f"{prefix}g"):
            rss = _status_kib(servers.pids["master"], "VmRSS") / 1024
            groups.append({"groups": len(group_names), "rate": rate, "master_rss_mib": rss})
    return topics, groups, _clients(servers, topic_names, group_names, connections)


Pair = Callable[[], AbstractContextManager[remoting.Servers]]


def _systems(rmq: rocketmq.RocketMQ, root: Path) -> Iterator[tuple[str, Pair]]:
    yield "rocketha", lambda: remoting.rocketha_pair(root / "rocketha", "ASYNC_MASTER")
    yield "rocketmq", lambda: remoting.rocketmq_pair(rmq, root / "rocketmq", "ASYNC_MASTER")


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq()
    steps = [500, 1000, 2000] if quick else [1000, 5000, 10_000, 50_000]
    group_steps = [500, 1000] if quick else [1000, 10_000]
    curves: dict[str, list[Curve]] = {"rocketha": [], "rocketmq": []}
    group_curves: dict[str, list[Curve]] = {"rocketha": [], "rocketmq": []}
    client_curves: dict[str, list[Curve]] = {"rocketha": [], "rocketmq": []}
    for r in range(runs):
        with _children.temp_run_dir("bench-scale") as d:
            for name, pair in _systems(rmq, Path(d) / str(r)):
                mine = steps if name == "rocketha" else [s for s in steps if s <= ROCKETMQ_MAX]
                with pair() as servers:
                    topics, groups, clients = _grow(servers, mine, group_steps, f"Scale{r}_")
                curves[name].append(topics)
                group_curves[name].append(groups)
                client_curves[name].append(clients)
    return (
        _figures(curves)
        + _step_figures(group_curves, "groups", GROUP_FIGURES)
        + _step_figures(client_curves, "connections", CLIENT_FIGURES)
    )


#: Each group step's and each client step's figures: key, what, unit, whether higher is better.
GROUP_FIGURES = (("rate", "consumer groups created/s", "groups/s", True),)
CLIENT_FIGURES = (
    ("join_rate", "clients joined/s (first heartbeat)", "clients/s", True),
    ("heartbeat_p50_us", "heartbeat p50", "us", False),
    ("master_rss_mib", "master RSS", "MiB", False),
    ("master_fds", "master open files", "fds", False),
)


def _step_figures(
    curves: dict[str, list[Curve]], counted: str, figures: Sequence[tuple[str, str, str, bool]]
) -> list[Figure]:
    """Each step's ``figures`` (steps of ``counted``: groups, connections) beside RocketMQ's."""
    ours, theirs = curves["rocketha"], curves["rocketmq"]
    return [
        Figure(
            "scale",
            f"{what} at {at[counted]:,.0f} {counted}",
            unit,
            [run[i][key] for run in ours],
            "RocketMQ 5.4.0",
            [run[i][key] for run in theirs],
            higher_is_better=higher,
        )
        for i, at in enumerate(ours[0])
        for key, what, unit, higher in figures
    ]


#: Each step's figures: key, what, unit, whether higher is better, and issue 32's target at
#: 10,000 topics.
FIGURES = (
    ("rate", "topics created/s", "topics/s", True, ">= 1.5"),
    ("lookup_p50_us", "route lookup p50", "us", False, "<= 1"),
    ("table_bytes", "whole topic table", "bytes", False, None),
    ("table_fetch_ms", "whole topic table fetched (a slave's sync)", "ms", False, None),
    ("sync_unchanged_ms", "a slave's periodic topic sync, nothing changed", "ms", False, None),
    ("register_first_ms", "REGISTER_BROKER of it, a new broker's", "ms", False, "<= 1"),
    ("register_again_ms", "REGISTER_BROKER of it again (the period's)", "ms", False, "<= 1"),
    ("master_rss_mib", "master RSS", "MiB", False, None),
    ("namesrv_rss_mib", "name server RSS", "MiB", False, None),
    ("master_fds", "master open files", "fds", False, None),
)


def _figures(curves: dict[str, list[Curve]]) -> list[Figure]:
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
