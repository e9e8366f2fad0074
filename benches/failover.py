"""Failover in controller mode: how long a group's producers cannot write once its master dies.

A group is three brokers of one name with automatic failover, a name server and whatever
elects their master; Apache RocketMQ 5.4.0's is a standalone 3-node DLedger controller and
brokers in controller mode with ``allAckInSyncStateSet`` (``benches/peers/controller.py``, on
the harness's small JVMs). The Java producer (``Peer stream``: synchronous sends one after the
other, :data:`PAUSE_MS` apart, no retries, its routes refreshed every :data:`ROUTE_POLL_MS`)
sends throughout. A trial SIGKILLs the master and times, from the kill:

* the election: until the group reports a master other than the killed one (for RocketMQ its
  controller leader, polled);
* the first SEND_OK stored by the new master (the producer's clock: both are epoch time).

Then the killed broker is restarted and the group waits until it is formed again (every broker
back in the master's SyncStateSet, the route at the name server), so every trial starts from
a whole group; the trials (``runs``: 5, 3 with ``--quick``) are failovers of one cluster.

Figures: kill to first SEND_OK on the new master, p50 and p99 over the trials, against kill to
election in the same trials (what the role change, the name server's route and the client add
to the election). Another system's group goes beside RocketMQ's as a :data:`GroupFactory` in
:func:`groups`; its figures then also stand against RocketMQ's. Run only when named
(``rocketha bench failover``): a trial is a broker restart, tens of seconds on 2 cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rocketha import _children

from benches.common import Figure, Skipped, percentile
from benches.peers import controller, rocketmq

SCENARIO = "failover"
TOPIC = "FailoverBench"
#: Between two sends: the producer must not spin while every send fails at once.
PAUSE_MS = 5
#: The producer's route refresh (RocketMQ's default is 30 s): the time a client needs to learn
#: the new master, which this bench is not about, is kept below the election's.
ROUTE_POLL_MS = 100
#: SEND_OK the producer gets before the first trial and after each healing.
STEADY = 20


class FailoverGroup(Protocol):
    """A running group with automatic failover (see the module doc)."""

    #: The figures' name for it, such as "RocketMQ 5.4.0".
    name: str
    #: Its name server, host:port.
    namesrv: str

    def create_topic(self, topic: str) -> None:
        """Creates ``topic`` on every broker; returns once the name server routes it."""

    def master(self) -> str:
        """The master's address, once the group is formed."""

    def kill_master(self) -> str:
        """SIGKILLs the master; its address."""

    def new_master(self, old: str) -> str:
        """The address of the next master, once it is another running broker than ``old``."""

    def heal(self) -> None:
        """Restarts the killed broker; returns once the group is formed and routed again."""


#: Starts a group under a directory; stopping it ends the ``with`` block.
GroupFactory = Callable[[Path], AbstractContextManager[FailoverGroup]]


@dataclass(frozen=True)
class Trial:
    """One failover, in seconds from the SIGKILL."""

    elected: float
    first_ok: float


class _RocketMQGroup:
    def __init__(self, name: str, namesrv: str, brokers: controller.BrokerGroup) -> None:
        self.name, self.namesrv, self.brokers = name, namesrv, brokers
        self.topic: str | None = None
        self.killed: int | None = None

    def create_topic(self, topic: str) -> None:
        self.brokers.wait_formed()
        self.brokers.create_topic(topic)
        self.brokers.wait_routed(topic)
        self.topic = topic

    def master(self) -> str:
        address = self.brokers.wait_formed().master_address
        assert address is not None
        return address

    def kill_master(self) -> str:
        index = self.brokers.master_index()
        if index is None:
            raise RuntimeError(f"{self.name}: no running master to kill")
        address = self.brokers.broker(index).address
        self.brokers.kill(index)
        self.killed = index
        return address

    def new_master(self, old: str) -> str:
        address = self.brokers.wait_new_master(old).master_address
        assert address is not None
        return address

    def heal(self) -> None:
        assert self.killed is not None and self.topic is not None
        self.brokers.start(self.killed)
        self.killed = None
        self.brokers.wait_routed(self.topic)


@contextmanager
def rocketmq_group(rmq: rocketmq.RocketMQ, root: Path) -> Iterator[FailoverGroup]:
    """Apache RocketMQ in controller mode: 3 controller nodes, a name server, 3 brokers."""
    with (
        controller.start_controllers(rmq, root / "controllers") as controllers,
        rmq.namesrv(root / "namesrv") as namesrv,
        controller.BrokerGroup(
            rmq, root / "brokers", controllers, namesrv, broker_name="failover-bench"
        ) as brokers,
    ):
        yield _RocketMQGroup(f"RocketMQ {rmq.version}", namesrv.address, brokers)


def groups(rmq: rocketmq.RocketMQ) -> list[GroupFactory]:
    """The systems measured, the baseline (RocketMQ) first."""
    return [lambda root: rocketmq_group(rmq, root)]


def _trial(group: FailoverGroup, producer: controller.Streamer) -> Trial:
    old = group.master()
    killed_at = time.time()
    group.kill_master()
    new = group.new_master(old)
    elected_at = time.time()
    first = producer.wait_acked(1, after=killed_at, by=new)[0]
    group.heal()
    producer.wait_acked(STEADY, after=time.time())
    return Trial(elected_at - killed_at, first.at - killed_at)


def failover_trials(
    factory: GroupFactory, rmq: rocketmq.RocketMQ, root: Path, trials: int
) -> tuple[str, list[Trial]]:
    """``trials`` failovers of one group that ``factory`` starts under ``root``, the RocketMQ
    Java producer of ``rmq`` sending throughout: the group's name and each trial."""
    with factory(root / "group") as group:
        group.create_topic(TOPIC)
        producer = controller.stream(
            rmq,
            group.namesrv,
            TOPIC,
            home=root / "producer",
            group="bench-failover",
            pause_ms=PAUSE_MS,
            route_poll_ms=ROUTE_POLL_MS,
        )
        with producer:
            producer.wait_acked(STEADY)
            out = [_trial(group, producer) for _ in range(trials)]
            producer.stop()
        return group.name, out


def run(quick: bool, runs: int) -> list[Figure]:
    why = rocketmq.missing_tools()
    if why:
        raise Skipped(f"the peer RocketMQ is Java: {why}")
    try:
        rmq = rocketmq.RocketMQ.resolve(rocketmq.VERSION_5)
    except rocketmq.Unavailable as e:
        raise Skipped(f"the peer RocketMQ does not resolve: {e}") from None
    results: dict[str, list[Trial]] = {}
    with _children.temp_run_dir("bench-failover") as d:
        for i, factory in enumerate(groups(rmq)):
            name, trials = failover_trials(factory, rmq, Path(d) / f"group-{i}", runs)
            results[name] = trials
    return figures(results)


def _ms(trials: list[Trial], what: str, q: float | None) -> list[float]:
    values = [getattr(t, what) * 1e3 for t in trials]
    return values if q is None else [percentile(values, q)]


def figures(results: dict[str, list[Trial]]) -> list[Figure]:
    """p50 (the median of every trial) and p99 of each system's failovers against its own
    election, then against the first system's (the baseline)."""
    out = []
    baseline = next(iter(results))
    for name, trials in results.items():
        for label, q in (("p50", None), ("p99", 0.99)):
            kill_to_ok = f"{name}: SIGKILL of the master to the first SEND_OK on the new master"
            out.append(
                Figure(
                    SCENARIO,
                    f"{kill_to_ok} {label}",
                    "ms",
                    _ms(trials, "first_ok", q),
                    f"SIGKILL to the election of the new master {label}",
                    _ms(trials, "elected", q),
                    higher_is_better=False,
                )
            )
            if name != baseline:
                out.append(
                    Figure(
                        SCENARIO,
                        f"{kill_to_ok} {label}, against {baseline}",
                        "ms",
                        _ms(trials, "first_ok", q),
                        f"{baseline} {label}, same producer",
                        _ms(results[baseline], "first_ok", q),
                        higher_is_better=False,
                    )
                )
    return out
