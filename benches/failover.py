"""Failover in controller mode: how long a group's producers cannot write once its master dies,
whether any acknowledged message is lost, and what controller mode costs SYNC sends.

A group is three brokers of one name under one standalone 3-node DLedger controller of Apache
RocketMQ 5.4.0 (``benches/peers/controller.py``, on the harness's small JVMs), started once
for the run: Apache RocketMQ 5.4.0's brokers with its name server, then rocketha's (``rocketha
broker`` processes, :data:`ROCKETHA_CONF`) with ``rocketha namesrv``, each group in controller
mode with ``allAckInSyncStateSet``. The Java producer (``Peer stream``: synchronous sends one
after the other, :data:`PAUSE_MS` apart, no retries, its routes refreshed every
:data:`ROUTE_POLL_MS`) sends throughout. A trial SIGKILLs the master and times, from the kill:

* the election: until the controller leader reports a master other than the killed one
  (polled);
* the first SEND_OK stored by the new master (the producer's clock: both are epoch time).

Then every SEND_OK the producer saw so far is looked for in the new master's commit log, read
from its files without either system's code (``rocketmq.log_messages``): each trial prints
"lost: N of M acknowledged", and any loss fails the scenario once the figures are printed.
The killed broker is restarted and the group waits until it is formed again (every broker back
in the master's SyncStateSet, the route at the name server), so every trial starts from a
whole group; the trials (``--runs``: 5, 3 with ``--quick``) are failovers of one cluster.

Figures: kill to first SEND_OK on the new master, p50 and p99 over the trials, against kill to
election in the same trials (what the role change, the name server's route and the client add
to the election), and rocketha's against RocketMQ's; acknowledged messages lost. Last, SYNC
sends/s of :data:`LOAD_CONNECTIONS` synchronous Java senders (``Load.java``) on each formed
group (a put waits for every member of the SyncStateSet) against a classic SYNC_MASTER + one
SLAVE of the same system (RocketMQ's with ``inSyncReplicas=2``; not with ``--quick``). Run only
when named (``rocketha bench failover``): a trial is a broker restart, tens of seconds on 2
cores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rocketha import _children

from benches import remoting
from benches.common import Figure, peer_rocketmq, percentile, print_table, skip_figure
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
#: Every broker's commit log segment, both systems and both modes: a segment roll costs
#: throughput, so the sends/s figures must not differ by it.
SEGMENT = 64 << 20
#: The sends/s figures: ``Load.java``'s synchronous senders, 1 KiB messages.
LOAD_TOPIC = "FailoverBenchLoad"
LOAD_CONNECTIONS = 8
#: rocketha's broker.conf keys in controller mode (beside :data:`controller.CONTROLLER_MODE`),
#: ports chosen by the OS, HA on loopback; the name server is told at RocketMQ's default period,
#: as for RocketMQ's brokers (a slave in controller mode registers every 500 ms by itself until
#: the name server names the controller's master).
ROCKETHA_CONF: dict[str, Any] = {
    "mappedFileSizeCommitLog": SEGMENT,
    "listenPort": 0,
    "haListenPort": 0,
    "haListenAddress": "127.0.0.1",
    "slaveTimeout": 10000,
}


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

    def store(self, address: str) -> Path:
        """The store directory (``storePathRootDir``) of the running broker at ``address``."""

    def heal(self) -> None:
        """Restarts the killed broker; returns once the group is formed and routed again."""


#: Starts a group under a directory at the controller given; stopping it ends the ``with``
#: block.
GroupFactory = Callable[[Path, controller.Controllers], AbstractContextManager[FailoverGroup]]


@dataclass(frozen=True)
class Trial:
    """One failover: seconds from the SIGKILL, and the loss check on the new master."""

    elected: float
    first_ok: float
    #: SEND_OK the producer had seen by then, and how many of them the new master lacks.
    acked: int
    lost: int


@dataclass(frozen=True)
class Measured:
    """One system's trials and its group's SYNC sends/s (None: not measured)."""

    trials: list[Trial]
    sends_per_s: float | None


class _Group:
    """A :class:`controller.ControllerModeGroup` as a :class:`FailoverGroup`."""

    def __init__(
        self, name: str, namesrv: str, brokers: controller.ControllerModeGroup[Any]
    ) -> None:
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
        address: str = self.brokers.broker(index).address
        self.brokers.kill(index)
        self.killed = index
        return address

    def new_master(self, old: str) -> str:
        address = self.brokers.wait_new_master(old).master_address
        assert address is not None
        return address

    def store(self, address: str) -> Path:
        store: Path = self.brokers.broker(self.brokers.addresses()[address]).store
        return store

    def heal(self) -> None:
        assert self.killed is not None and self.topic is not None
        self.brokers.start(self.killed)
        self.killed = None
        self.brokers.wait_routed(self.topic)


class RochaBroker:
    """``rocketha -v broker -c broker.conf`` in ``home`` (its store under ``home / store``,
    its log in ``home / broker.log``), started once it printed its ``started`` line."""

    def __init__(self, home: Path, conf: dict[str, Any]) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.store = home / "store"
        path = home / "broker.conf"
        keys = {**conf, "storePathRootDir": self.store}
        path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        self.process = remoting._Process(home / "broker.log", "-v", "broker", "-c", str(path))
        self.address: str = self.process.started["listen_address"]

    def kill(self) -> int:
        return _children.kill(self.process.proc)

    def stop(self, timeout: float = 30.0) -> int:
        return _children.stop(self.process.proc, timeout)


class RochaBrokerGroup(controller.ControllerModeGroup[RochaBroker]):
    """rocketha's brokers in controller mode, :data:`ROCKETHA_CONF`."""

    def spawn(self, index: int) -> RochaBroker:
        return RochaBroker(self.root / f"b{index}", self.conf)


@dataclass(frozen=True)
class NameServerAddress:
    address: str


@contextmanager
def rocketmq_group(
    rmq: rocketmq.RocketMQ, root: Path, controllers: controller.Controllers
) -> Iterator[FailoverGroup]:
    """Apache RocketMQ in controller mode: a name server and 3 brokers."""
    with (
        rmq.namesrv(root / "namesrv") as namesrv,
        controller.BrokerGroup(
            rmq,
            root / "brokers",
            controllers,
            namesrv,
            broker_name="failover-rocketmq",
            mappedFileSizeCommitLog=SEGMENT,
        ) as brokers,
    ):
        yield _Group(f"RocketMQ {rmq.version}", namesrv.address, brokers)


@contextmanager
def rocketha_group(root: Path, controllers: controller.Controllers) -> Iterator[FailoverGroup]:
    """rocketha in controller mode: ``rocketha namesrv`` and 3 ``rocketha broker`` processes."""
    root.mkdir(parents=True, exist_ok=True)
    namesrv = remoting._Process(root / "namesrv.log", "-v", "namesrv", "--listen", "127.0.0.1:0")
    try:
        address = namesrv.started["listen"]
        with RochaBrokerGroup(
            root / "brokers",
            controllers,
            NameServerAddress(address),
            broker_name="failover-rocketha",
            **ROCKETHA_CONF,
        ) as brokers:
            yield _Group("rocketha", address, brokers)
    finally:
        namesrv.stop()


def groups(rmq: rocketmq.RocketMQ) -> list[GroupFactory]:
    """The systems measured, the baseline (RocketMQ) first."""
    return [lambda root, ctl: rocketmq_group(rmq, root, ctl), rocketha_group]


def _check_acked(group: FailoverGroup, producer: controller.Streamer, at: str) -> tuple[int, int]:
    """Every SEND_OK the producer saw so far against the commit log of the broker at ``at``
    (read from its files): how many SEND_OK, how many of their bodies it lacks."""
    acked = [a for a in producer.acks if a.ok]
    stored = {body for _, t, body in rocketmq.log_messages(group.store(at)) if t == TOPIC}
    lost = [a.seq for a in acked if producer.body(a.seq) not in stored]
    if lost:
        print(f"{group.name}: acknowledged, not on the new master {at}: seq {lost[:50]}")
    return len(acked), len(lost)


def _trial(group: FailoverGroup, producer: controller.Streamer) -> Trial:
    old = group.master()
    killed_at = time.time()
    group.kill_master()
    new = group.new_master(old)
    elected_at = time.time()
    first = producer.wait_acked(1, after=killed_at, by=new)[0]
    acked, lost = _check_acked(group, producer, new)
    group.heal()
    producer.wait_acked(STEADY, after=time.time())
    return Trial(elected_at - killed_at, first.at - killed_at, acked, lost)


def _sends_per_s(
    rmq: rocketmq.RocketMQ, namesrv: str, home: Path, seconds: float, broker: str | None = None
) -> float:
    """SEND_OK/s of :data:`LOAD_CONNECTIONS` synchronous ``DefaultMQProducer`` senders of 1 KiB
    messages to :data:`LOAD_TOPIC` (created first on ``broker``, if given)."""
    r = rmq.load(namesrv, LOAD_TOPIC, LOAD_CONNECTIONS, seconds, home=home, broker=broker)
    if r["ok"] != r["sent"]:
        print(f"{home.name}: not every send SEND_OK: {r['statuses']}")
    return float(r["ok"]) / float(r["seconds"])


def failover_trials(
    factory: GroupFactory,
    rmq: rocketmq.RocketMQ,
    root: Path,
    controllers: controller.Controllers,
    trials: int,
    load_seconds: float,
) -> tuple[str, Measured]:
    """``trials`` failovers of one group that ``factory`` starts under ``root``, the RocketMQ
    Java producer of ``rmq`` sending throughout, then its SYNC sends/s: the group's name and
    what was measured."""
    with factory(root / "group", controllers) as group:
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
        out = []
        with producer:
            producer.wait_acked(STEADY)
            for i in range(trials):
                trial = _trial(group, producer)
                print(
                    f"{group.name} trial {i + 1}/{trials}: elected {trial.elected * 1e3:.0f} ms, "
                    f"first SEND_OK {trial.first_ok * 1e3:.0f} ms, "
                    f"lost: {trial.lost} of {trial.acked} acknowledged",
                    flush=True,
                )
                out.append(trial)
            producer.stop()
        group.create_topic(LOAD_TOPIC)
        sends = _sends_per_s(rmq, group.namesrv, root / "load", load_seconds)
        return group.name, Measured(out, sends)


def classic_sends_per_s(
    rmq: rocketmq.RocketMQ, root: Path, seconds: float, *, rocketmq_too: bool
) -> dict[str, float]:
    """SYNC sends/s of classic SYNC_MASTER + SLAVE pairs, by system name: rocketha's, and
    Apache RocketMQ's (``inSyncReplicas=2``) if ``rocketmq_too``."""
    out = {}
    with remoting.rocketha_pair(
        root / "rocketha", "SYNC_MASTER", mappedFileSizeCommitLog=SEGMENT
    ) as at:
        out["rocketha"] = _sends_per_s(rmq, at.namesrv, root / "rocketha-load", seconds, at.address)
    if rocketmq_too:
        name = f"RocketMQ {rmq.version}"
        with remoting.rocketmq_pair(rmq, root / "rocketmq", mappedFileSizeCommitLog=SEGMENT) as at:
            out[name] = _sends_per_s(rmq, at.namesrv, root / "rocketmq-load", seconds, at.address)
    return out


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq()
    seconds = 2.0 if quick else 10.0
    results: dict[str, Measured] = {}
    with _children.temp_run_dir("bench-failover") as d:
        root = Path(d)
        with controller.start_controllers(rmq, root / "controllers") as controllers:
            for i, factory in enumerate(groups(rmq)):
                home = root / f"group-{i}"
                name, measured = failover_trials(factory, rmq, home, controllers, runs, seconds)
                results[name] = measured
        classic = classic_sends_per_s(rmq, root / "classic", seconds, rocketmq_too=not quick)
    if quick:
        skip_figure(SCENARIO, "RocketMQ SYNC sends/s, classic", "not measured with --quick")
    out = figures({n: m.trials for n, m in results.items()})
    out += sends_figures({n: m.sends_per_s for n, m in results.items()}, classic)
    _fail_on_loss(results, out)
    return out


def _fail_on_loss(results: dict[str, Measured], out: list[Figure]) -> None:
    """Prints each system's loss; any acknowledged message lost fails the scenario (after the
    figures are printed: they are what the loss happened under)."""
    losses = []
    for name, m in results.items():
        lost = sum(t.lost for t in m.trials)
        acked = max((t.acked for t in m.trials), default=0)
        print(f"{name}: lost: {lost} of {acked} acknowledged ({len(m.trials)} failovers)")
        if lost:
            losses.append(f"{name} lost {lost} acknowledged messages")
    if losses:
        print_table(out)
        raise RuntimeError("; ".join(losses))


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
            if name == baseline:
                continue
            against = (
                (f"{kill_to_ok} {label}", "first_ok"),
                (f"{name}: SIGKILL of the master to the election {label}", "elected"),
            )
            for figure, what in against:
                out.append(
                    Figure(
                        SCENARIO,
                        f"{figure}, against {baseline}",
                        "ms",
                        _ms(trials, what, q),
                        f"{baseline} {label}, same controller and producer",
                        _ms(results[baseline], what, q),
                        higher_is_better=False,
                    )
                )
    return out


def sends_figures(
    controller_mode: dict[str, float | None], classic: dict[str, float]
) -> list[Figure]:
    """Each system's SYNC sends/s in controller mode (every SyncStateSet member acks) against
    its classic SYNC_MASTER + SLAVE, same producer."""
    out = []
    for name, sends in controller_mode.items():
        if sends is None:
            continue
        measured = name in classic
        out.append(
            Figure(
                SCENARIO,
                f"{name}: SYNC sends/s, controller mode (3 brokers, allAckInSyncStateSet), "
                f"{LOAD_CONNECTIONS} connections",
                "msg/s",
                [sends],
                "classic SYNC_MASTER + SLAVE, same producer" if measured else None,
                [classic[name]] if measured else [],
            )
        )
    return out
