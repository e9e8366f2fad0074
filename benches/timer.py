"""Timer messages (RocketMQ 5's TimerMessageStore: TIMER_DELIVER_MS), rocketha's broker and
Apache RocketMQ 5.4.0's (``timerWheelEnable=true``, its default) in the same run, each an
ASYNC_MASTER in a process of its own behind its own name server, driven by the same Java
remoting client (``java/TimerPeer.java``, the 5.4.0 client: one ``DefaultMQProducer``
sending asynchronously, at most :data:`INFLIGHT` unanswered; one ``DefaultMQPushConsumer``):

* **burst**: :data:`BURST` timers (``--quick``: a tenth) all due at one moment T, sent as fast
  as the producer goes, T set a bit after the last send is expected to be answered (from the
  moment the consumer is ready, twice the time the same producer took for as many plain sends,
  plus :data:`BURST_MARGIN_MS`);
* **steady**: :data:`STEADY_RATE` timers/s (``--quick``: a tenth), each due
  :data:`STEADY_AHEAD_MS` after its send, for :data:`STEADY_SECONDS` (``--quick``:
  :data:`STEADY_SECONDS_QUICK`); the rate the producer achieved is reported;
* **plain**: as many plain messages of the same size from the same producer, the baseline of
  the timer sends/s.

Figures: delivery lateness (receive time - due time) p50/p99/max of each load and its
broker's part (the delivered copy's store time - due time: what is left is the consumer's
draining), the broker
process's CPU seconds over each load (``/proc/PID/stat``, from the first send to the last
delivery), timer sends/s against plain sends/s on the same broker, and each rocketha figure
against RocketMQ's (ratio rocketha/RocketMQ). A broker that refuses timer sends (rocketha
before its TimerMessageStore) leaves its timer figures out, with its answer under
``skipped``; RocketMQ's are still measured.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketha import _children

from benches.common import Figure, peer_rocketmq, skip_figure
from benches.peers import rocketmq
from benches.peers.controller import create_topic
from benches.remoting import _Process

SCENARIO = "timer"
BURST = 100_000
STEADY_RATE = 20_000
STEADY_SECONDS = 15.0
STEADY_SECONDS_QUICK = 10.0
STEADY_AHEAD_MS = 10_000
BURST_MARGIN_MS = 2_000
SIZE = 128
INFLIGHT = 256
#: Commit log segments that hold a whole run on either broker: no roll inside a measurement.
SEGMENT = 1 << 30
#: A hang's bound for a consumer, past the last due time.
DRAIN_TIMEOUT_MS = 120_000
SYSTEMS = ("rocketha", "rocketmq")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Servers:
    namesrv: str
    broker: str
    broker_pid: int


@contextlib.contextmanager
def _rocketha(root: Path) -> Iterator[Servers]:
    """``rocketha namesrv`` and an ASYNC_MASTER, as processes (the broker's CPU is its own)."""
    root.mkdir(parents=True, exist_ok=True)
    procs: list[_Process] = []
    try:
        ns = _Process(root / "namesrv.log", "namesrv", "--listen", "127.0.0.1:0")
        procs.append(ns)
        keys = {
            "brokerName": "timer-bench",
            "brokerRole": "ASYNC_MASTER",
            "namesrvAddr": ns.started["listen"],
            "listenPort": 0,
            "haListenAddress": "127.0.0.1",
            "haListenPort": 0,
            "mappedFileSizeCommitLog": SEGMENT,
            "storePathRootDir": root / "store",
        }
        conf = root / "broker.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        broker = _Process(root / "broker.log", "broker", "-c", str(conf))
        procs.append(broker)
        yield Servers(ns.started["listen"], broker.started["listen_address"], broker.proc.pid)
    finally:
        for p in reversed(procs):
            p.stop()


@contextlib.contextmanager
def _rocketmq(rmq: rocketmq.RocketMQ, root: Path) -> Iterator[Servers]:
    """RocketMQ's name server and ASYNC_MASTER on the JVM and settings ``bench peers`` gives
    it (a user's G1 JVM, one send thread per core)."""
    from benches.peers_bench import ROCKETMQ_JVM, ROCKETMQ_TUNING

    with (
        rmq.namesrv(root / "namesrv") as ns,
        rmq.broker(
            root / "broker",
            ns,
            jvm=ROCKETMQ_JVM,
            brokerName="timer-bench",
            mappedFileSizeCommitLog=SEGMENT,
            **ROCKETMQ_TUNING,
        ) as broker,
    ):
        yield Servers(ns.address, broker.address, broker.proc.pid)


class Refused(Exception):
    """The broker refused timer sends; the message is its answer."""


@dataclass
class Load:
    """One timer load's measures on one broker."""

    sends_per_s: float
    lateness_ms: dict[str, float]
    cpu_s: float
    #: The broker's part of the lateness: the delivered copy's store time - due time.
    stored_lateness_ms: dict[str, float] = field(default_factory=dict)
    #: Whether the last send was answered before the burst's due time (a send after it would
    #: be due in the past, delivered at once, and not a burst any more).
    before_due: bool = True


@dataclass
class Results:
    """Every run's measures, by system."""

    plain: dict[str, list[float]] = field(default_factory=dict)
    burst: dict[str, list[Load]] = field(default_factory=dict)
    steady: dict[str, list[Load]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def _timers(
    rmq: rocketmq.RocketMQ,
    s: Servers,
    home: Path,
    topic: str,
    count: int,
    *,
    mode: str,
    ahead_ms: int,
    rate: float,
    sends_ms: int,
) -> tuple[rocketmq.TimerSendRun, dict[str, Any], float, int]:
    """A consumer of ``topic`` ready, then ``count`` timer sends, due ``ahead_ms`` after each
    send (``mode`` ``ahead``) or all ``ahead_ms`` after the consumer was ready (``at``), the
    sends expected to take ``sends_ms``; waits for every delivery: (what the producer did, the
    consumer's summary, the broker's CPU seconds from the first send to the last delivery, the
    due time of ``at``)."""
    create_topic(s.broker, topic)
    timeout_ms = sends_ms + ahead_ms + DRAIN_TIMEOUT_MS
    with rmq.timer_receiver(
        s.namesrv,
        topic,
        f"{topic}-group",
        count,
        home=home / f"{topic}-receive",
        timeout_ms=timeout_ms,
        lines=False,
        bench=True,
    ) as receiver:
        receiver.wait_ready()
        due = int(time.time() * 1000) + ahead_ms
        cpu = cpu_seconds(s.broker_pid)
        sent = rmq.timer_send(
            s.namesrv,
            topic,
            count,
            home=home / f"{topic}-send",
            mode=mode,
            at_ms=due if mode == "at" else ahead_ms,
            size=SIZE,
            inflight=INFLIGHT,
            rate=rate,
            lines=False,
            bench=True,
        )
        if sent.summary["failed"]:
            raise Refused(sent.failures[0] if sent.failures else str(sent.summary))
        got = receiver.finish(timeout_ms / 1000 + 60)
        cpu = cpu_seconds(s.broker_pid) - cpu
    if got["unique"] != count:
        raise RuntimeError(f"{topic}: {got['unique']} of {count} timers delivered: {got}")
    return sent, got, cpu, due


def _plain(rmq: rocketmq.RocketMQ, s: Servers, home: Path, count: int) -> float:
    """Plain sends/s of the timer loads' producer, same size, on a topic of their own."""
    create_topic(s.broker, "TimerPlain")
    run = rmq.timer_send(
        s.namesrv,
        "TimerPlain",
        count,
        home=home / "plain",
        mode="plain",
        size=SIZE,
        inflight=INFLIGHT,
        lines=False,
        bench=True,
    )
    if run.summary["failed"]:
        raise RuntimeError(f"plain sends failed: {run.failures[:3]} {run.summary}")
    return float(run.summary["rate"])


def _measure(rmq: rocketmq.RocketMQ, s: Servers, home: Path, quick: bool) -> dict[str, Any]:
    burst = BURST // 10 if quick else BURST
    rate = STEADY_RATE / 10 if quick else STEADY_RATE
    seconds = STEADY_SECONDS_QUICK if quick else STEADY_SECONDS
    plain_rate = _plain(rmq, s, home, burst)
    # T: twice the plain sends' time after the consumer is ready, and a margin: a timer
    # producer slower than its plain sends by half still sends every message before T.
    sends_ms = int(burst / plain_rate * 1000)
    sent, got, cpu, due = _timers(
        rmq,
        s,
        home,
        "TimerBurst",
        burst,
        mode="at",
        ahead_ms=2 * sends_ms + BURST_MARGIN_MS,
        rate=0,
        sends_ms=sends_ms,
    )
    burst_load = Load(
        float(sent.summary["rate"]),
        got["lateness_ms"],
        cpu,
        got["stored_lateness_ms"],
        sent.summary["last_ms"] <= due,
    )
    count = int(rate * seconds)
    sent, got, cpu, _ = _timers(
        rmq,
        s,
        home,
        "TimerSteady",
        count,
        mode="ahead",
        ahead_ms=STEADY_AHEAD_MS,
        rate=rate,
        sends_ms=int(seconds * 1000),
    )
    steady_load = Load(
        float(sent.summary["rate"]), got["lateness_ms"], cpu, got["stored_lateness_ms"]
    )
    return {"plain": plain_rate, "burst": burst_load, "steady": steady_load}


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq("the Java client and the peer RocketMQ")
    results = Results()
    for _ in range(runs):
        with _children.temp_run_dir("bench-timer") as d:
            for system in SYSTEMS:
                if system in results.refused:
                    continue
                root = Path(d) / system
                start = _rocketha(root) if system == "rocketha" else _rocketmq(rmq, root)
                with start as servers:
                    try:
                        got = _measure(rmq, servers, root, quick)
                    except Refused as e:
                        results.refused[system] = str(e)
                        continue
                results.plain.setdefault(system, []).append(got["plain"])
                results.burst.setdefault(system, []).append(got["burst"])
                results.steady.setdefault(system, []).append(got["steady"])
    for system, answer in results.refused.items():
        skip_figure(SCENARIO, f"{system} timer figures", f"the broker refused: {answer}")
    for system, loads in results.burst.items():
        late = sum(not load.before_due for load in loads)
        if late:
            skip_figure(
                SCENARIO,
                f"{system} burst: {late} of {len(loads)} runs",
                "the last send was answered after the burst's due time",
            )
    return _figures(rmq.version, results, quick)


def _versus(
    name: str, unit: str, peer: str, ours: list[float], theirs: list[float], higher: bool
) -> list[Figure]:
    """rocketha's figure against RocketMQ's, or whichever side was measured alone."""
    if ours:
        baseline = peer if theirs else None
        return [Figure(SCENARIO, f"rocketha {name}", unit, ours, baseline, theirs, higher)]
    if theirs:
        return [Figure(SCENARIO, f"{peer} {name}", unit, theirs, higher_is_better=higher)]
    return []


def _figures(version: str, r: Results, quick: bool) -> list[Figure]:
    peer = f"RocketMQ {version}"
    names = {"rocketha": "rocketha", "rocketmq": peer}
    burst = BURST // 10 if quick else BURST
    rate = STEADY_RATE // 10 if quick else STEADY_RATE
    loads = {
        f"burst of {burst:,} due at once": r.burst,
        f"steady {rate:,}/s due {STEADY_AHEAD_MS // 1000} s ahead": r.steady,
    }
    figures = []
    for load, by_system in loads.items():
        ours, theirs = by_system.get("rocketha", []), by_system.get("rocketmq", [])
        for q in ("p50", "p99", "max"):
            figures += _versus(
                f"{load}: lateness {q}",
                "ms",
                peer,
                [float(x.lateness_ms[q]) for x in ours],
                [float(x.lateness_ms[q]) for x in theirs],
                higher=False,
            )
            figures += _versus(
                f"{load}: stored lateness {q} (the broker's part)",
                "ms",
                peer,
                [float(x.stored_lateness_ms[q]) for x in ours],
                [float(x.stored_lateness_ms[q]) for x in theirs],
                higher=False,
            )
        figures += _versus(
            f"{load}: broker CPU",
            "s",
            peer,
            [x.cpu_s for x in ours],
            [x.cpu_s for x in theirs],
            higher=False,
        )
        figures += _versus(
            f"{load}: timer sends/s",
            "msg/s",
            peer,
            [x.sends_per_s for x in ours],
            [x.sends_per_s for x in theirs],
            higher=True,
        )
        for system, measured in by_system.items():
            figures.append(
                Figure(
                    SCENARIO,
                    f"{names[system]} {load}: timer sends/s against plain",
                    "msg/s",
                    [x.sends_per_s for x in measured],
                    "plain sends, same producer and broker",
                    r.plain.get(system, []),
                )
            )
    return figures
