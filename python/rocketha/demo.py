"""``rocketha demo``: the whole picture on loopback, as processes.

A name server; a SYNC_MASTER; a SLAVE that learns its master from the name server; producers
in their own processes (``rocketha produce``); then a :class:`~rocketha.consumer.PullConsumer`
that the master redirects to the slave (``slaveReadEnable``, and an
``accessMessageInMemoryMaxRatio`` of 0 so that any consumer behind the head counts as slow).
Halfway through, the master is stopped; the consumer carries on from the slave. The summary
says how many messages were sent and acknowledged, from which broker each was consumed,
whether every acknowledged message arrived exactly once, and whether the replica's commit log
is byte-identical to the master's.

``rocketha demo --failover`` (:func:`run_failover`) shows controller mode instead: Apache
RocketMQ's controller (three ``ControllerStartup`` JVMs, :mod:`rocketha.controllers`) elects
the master of a group of three rocketha brokers; a producer sends SYNC throughout; the master
is SIGKILLed, the controller elects another member of the SyncStateSet and the producer goes on
there; the old master comes back as a slave. The summary gives the timings and how many
acknowledged messages each store holds (none may be lost).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from rocketha import _children
from rocketha._core import Message
from rocketha._service import ServiceThread
from rocketha.client import Producer, SendStatus
from rocketha.consumer import MASTER_ID, ConsumeFromWhere, PullConsumer
from rocketha.controllers import Controllers, GroupState, start_controllers, until
from rocketha.exceptions import RocketHAError
from rocketha.store import MessageStore, segment_checksums

#: Producer processes started side by side.
PRODUCERS = 2


class _Process:
    """``rocketha ARGS`` in a child process: its first stdout line is its ``started`` JSON,
    its log goes to a file (a pipe nobody drains would block it)."""

    def __init__(self, args: list[str], log: Path) -> None:
        with log.open("a") as err:
            self.proc = _children.spawn(
                [sys.executable, "-m", "rocketha", "-v", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.log = log
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RocketHAError(f"rocketha {args[0]} failed to start; see {log}")
        self.started: dict[str, Any] = json.loads(line)["started"]

    def stop(self) -> None:
        """SIGTERM, and wait: the process flushes and closes its store."""
        _children.stop(self.proc, timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _conf(path: Path, **keys: object) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path


def _status(broker: _Process) -> dict[str, Any]:
    url = f"http://127.0.0.1:{broker.started['metrics_port']}/status"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return dict(json.load(resp))


def _wait(what: str, predicate: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RocketHAError(f"demo: {what} did not happen within {seconds:g} s")
        time.sleep(0.05)


def run(
    root: Path, *, messages: int, size: int, topic: str, segment_size: int, say: IO[str] | None
) -> dict[str, Any]:
    """Runs the demo with stores and logs under ``root``; returns the figures."""

    def step(text: str) -> None:
        if say is not None:
            print(f"demo: {text}", file=say, flush=True)

    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        ns, master, slave = _start_cluster(root, segment_size, stack)
        step(
            f"name server {ns}, SYNC_MASTER {master.started['listen_address']}, SLAVE "
            f"{slave.started['listen_address']} (its master learned from the name server)"
        )
        _wait("the slave's replication", lambda: _status(slave).get("state") == "TRANSFER")
        master_addr = _status(slave).get("master_address")

        step(f"{PRODUCERS} producer processes send {messages} messages of {size} bytes")
        started = time.perf_counter()
        sent = _produce(ns, topic, messages, size, logs)
        send_seconds = time.perf_counter() - started
        statuses = Counter(s for s, _ in sent)
        acked = {i for s, i in sent if s == "SEND_OK"}

        step("a consumer of group demo-consumer starts from the first offset")
        consumed, before, sources = _consume_across_failover(
            root, ns, topic, len(sent), master, step
        )
        step("stopping the slave and comparing the commit logs")
        slave.stop()
        replicated = _replica_bytes(root)
    same = segment_checksums(root / "master") == segment_checksums(root / "slave")
    from_master = sources.get(MASTER_ID, 0)
    return {
        "messages_sent": len(sent),
        "send_statuses": dict(statuses),
        "sends_per_second": round(len(sent) / send_seconds) if send_seconds else 0,
        "slave_replicates_from": master_addr,
        "consumed": sum(consumed.values()),
        "consumed_from_master": from_master,
        "consumed_from_slave": sum(sources.values()) - from_master,
        "consumed_from_slave_after_master_stopped": sum(sources.values()) - sum(before.values()),
        "duplicates": sum(n - 1 for n in consumed.values() if n > 1),
        "missing": len(acked - set(consumed)),
        "replica_bytes": replicated,
        "replica_byte_identical": same,
    }


def _start_cluster(
    root: Path, segment_size: int, stack: ExitStack
) -> tuple[str, _Process, _Process]:
    """The name server, the SYNC_MASTER and the SLAVE, each stopped when ``stack`` closes;
    returns the name server's address and the two brokers."""
    logs = root / "logs"
    namesrv = _Process(["namesrv", "--listen", "127.0.0.1:0"], logs / "namesrv.log")
    stack.callback(namesrv.stop)
    ns = namesrv.started["listen"]
    common: dict[str, object] = {
        "brokerName": "demo-broker",
        "namesrvAddr": ns,
        "listenPort": 0,
        "metricsPort": 0,
        "mappedFileSizeCommitLog": segment_size,
        "slaveReadEnable": "true",
    }
    master_conf = _conf(
        root / "master.conf",
        brokerId=0,
        brokerRole="SYNC_MASTER",
        storePathRootDir=root / "master",
        haListenAddress="127.0.0.1",
        haListenPort=0,
        accessMessageInMemoryMaxRatio=0,
        **common,
    )
    master = _Process(["broker", "-c", str(master_conf)], logs / "master.log")
    stack.callback(master.stop)
    slave_conf = _conf(
        root / "slave.conf",
        brokerId=1,
        brokerRole="SLAVE",
        storePathRootDir=root / "slave",
        slaveSyncInterval=500,
        **common,
    )
    slave = _Process(["broker", "-c", str(slave_conf)], logs / "slave.log")
    stack.callback(slave.stop)
    return ns, master, slave


def _consume_across_failover(
    root: Path, ns: str, topic: str, sent: int, master: _Process, step: Callable[[str], None]
) -> tuple[Counter[str], dict[int, int], dict[int, int]]:
    """Half of the ``sent`` messages, the master stopped, then the rest from the slave;
    returns how many times each message arrived and, before and after the master stopped,
    how many came from each broker id."""
    consumed: Counter[str] = Counter()
    with PullConsumer(
        ns,
        "demo-consumer",
        topic,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        pull_threshold_for_queue=256,
        master_retry_interval=1.0,
    ) as consumer:
        _consume(consumer, consumed, sent // 2)
        consumer.commit_sync()
        # The slave serves the topic and the group's offsets once it synced them from its
        # master (every slaveSyncInterval); a master stopped earlier leaves it without.
        _wait(
            "the slave's sync of the topic and offsets",
            lambda: (
                _saved(root / "slave", "topics.json", f'"{topic}"')
                and _saved(root / "slave", "consumerOffset.json", f"{topic}@demo-consumer")
            ),
        )
        before = consumer.consumed_from()
        step(
            f"consumed {sum(before.values())}: {before.get(MASTER_ID, 0)} from the "
            f"master, {sum(before.values()) - before.get(MASTER_ID, 0)} from the slave; "
            "stopping the master"
        )
        master.stop()
        _consume(consumer, consumed, sent)
        return consumed, before, consumer.consumed_from()


def _produce(ns: str, topic: str, messages: int, size: int, logs: Path) -> list[tuple[str, str]]:
    """``rocketha produce --json`` in :data:`PRODUCERS` processes at once; (status, msgId) of
    every send."""
    procs = []
    for p in range(PRODUCERS):
        count = messages // PRODUCERS + (1 if p < messages % PRODUCERS else 0)
        args = ["produce", "--namesrv", ns, "--topic", topic, "--count", str(count)]
        with (logs / f"producer-{p}.log").open("a") as err:
            procs.append(
                _children.spawn(
                    [sys.executable, "-m", "rocketha", *args, "--size", str(size), "--json"],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            )
    sent = []
    try:
        for proc in procs:
            out, _ = proc.communicate()
            sent += [(r["status"], r["msg_id"]) for r in map(json.loads, out.splitlines())]
    finally:
        for proc in procs:
            _children.stop(proc)
    return sent


def _consume(consumer: PullConsumer, consumed: Counter[str], until: int) -> None:
    """Polls until ``until`` messages arrived in all; a message is known by its UNIQ_KEY."""
    deadline = time.monotonic() + 60
    while sum(consumed.values()) < until:
        if time.monotonic() > deadline:
            raise RocketHAError(
                f"demo: only {sum(consumed.values())} of {until} messages consumed in 60 s"
            )
        for msg in consumer.poll(1.0, max_messages=until - sum(consumed.values())):
            consumed[msg.properties.get("UNIQ_KEY", msg.msg_id)] += 1


def _saved(store: Path, name: str, needle: str) -> bool:
    """Whether the broker's ``config/NAME`` mentions ``needle`` (it saves what it syncs)."""
    path = store / "config" / name
    return path.exists() and needle in path.read_text()


def _replica_bytes(root: Path) -> int:
    """Bytes in the slave's commit log (its store is closed now)."""
    with MessageStore(root / "slave", read_only=True) as store:
        return int(store.max_offset)


# -- rocketha demo --failover ----------------------------------------------------------------

#: The broker group of ``demo --failover`` and its members' names (their store directories).
GROUP = "demo-ha"
MEMBERS = ("b0", "b1", "b2")


class _Sender:
    """A :class:`~rocketha.Producer` sending one message at a time, SYNC, on a thread of its
    own until :meth:`stop`, with the times (monotonic seconds) of every SEND_OK and every
    failure; after a failure, the next message is tried."""

    def __init__(self, ns: str, topic: str, size: int) -> None:
        self.producer = Producer(ns, "demo-failover-producer", send_timeout=3.0)
        self.topic, self.size = topic, size
        #: Every SEND_OK: when the send started, when it was answered, the body.
        self.acked: list[tuple[float, float, bytes]] = []
        #: Every send that failed: when it started, the error.
        self.failures: list[tuple[float, str]] = []
        self._thread = ServiceThread("demo-sender", self._run)
        self._thread.start()

    def _run(self, service: ServiceThread) -> None:
        seq = 0
        while not service.stopped:
            body = f"m-{seq:08d}-".encode().ljust(self.size, b"x")
            seq += 1
            started = time.monotonic()
            try:
                result = self.producer.send(Message(self.topic, body))
            except RocketHAError as e:
                self.failures.append((started, f"{type(e).__name__}: {e}"))
                # Not a wait for readiness: a pause so a group without a master is not
                # flooded while the controller elects one.
                service.wait_for_running(0.05)
                continue
            if result.status == SendStatus.SEND_OK:
                self.acked.append((started, time.monotonic(), body))
            else:
                self.failures.append((started, str(result.status)))

    def first_ack_of_a_send_after(self, moment: float) -> float | None:
        """When the first send started after ``moment`` was acknowledged, if one was."""
        return next((at for started, at, _ in list(self.acked) if started > moment), None)

    def stop(self) -> None:
        self._thread.shutdown()
        self.producer.close()


def _member_conf(root: Path, name: str, ns: str, ctl: Controllers, segment_size: int) -> Path:
    """A broker.conf of the group: controller mode, the role and broker id the controller's
    to give, acknowledged once the whole SyncStateSet holds a put, OS-chosen ports."""
    return _conf(
        root / f"{name}.conf",
        brokerClusterName="DemoCluster",
        brokerName=GROUP,
        brokerId=-1,
        brokerRole="SLAVE",
        enableControllerMode="true",
        controllerAddr=ctl.controller_addr,
        namesrvAddr=ns,
        storePathRootDir=root / name,
        mappedFileSizeCommitLog=segment_size,
        listenPort=0,
        haListenPort=0,
        haListenAddress="127.0.0.1",
        registerNameServerPeriod=500,
        slaveSyncInterval=1000,
        # A put waits for every member of the SyncStateSet: whichever the controller elects
        # holds every acknowledged message.
        allAckInSyncStateSet="true",
    )


class _Group:
    """The three rocketha broker processes, by the address each listens on."""

    def __init__(self, root: Path, ns: str, ctl: Controllers, segment_size: int) -> None:
        self.root, self.ctl = root, ctl
        self.confs = {m: _member_conf(root, m, ns, ctl, segment_size) for m in MEMBERS}
        self.procs: dict[str, _Process] = {}
        self.names: dict[str, str] = {}

    def start(self, name: str) -> _Process:
        proc = _Process(["broker", "-c", str(self.confs[name])], self.root / "logs" / f"{name}.log")
        self.procs[proc.started["listen_address"]] = proc
        self.names[proc.started["listen_address"]] = name
        return proc

    def kill(self, address: str) -> None:
        _children.kill(self.procs.pop(address).proc)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.stop()
        self.procs.clear()

    def state(self) -> GroupState | None:
        return self.ctl.group_state(GROUP)

    def formed(self) -> GroupState:
        """Until the controller has a running master and every running broker, alive, in its
        SyncStateSet."""

        def whole() -> GroupState | None:
            state = self.state()
            running = set(self.procs)
            if state is None or state.master_address not in running:
                return None
            alive = all(r.alive for r in state.in_sync)
            return state if alive and state.sync_state_set == running else None

        return until(whole, f"group {GROUP} formed (a master, everyone in its SyncStateSet)")

    def describe(self, state: GroupState) -> str:
        ids = ", ".join(
            f"{self.names.get(r.address, r.address)} (id {r.broker_id})" for r in state.in_sync
        )
        master = self.names.get(state.master_address or "", state.master_address)
        return f"master {master} (id {state.master_id}, epoch {state.master_epoch}), in sync: {ids}"


def run_failover(
    root: Path, *, messages: int, size: int, topic: str, segment_size: int, say: IO[str] | None
) -> dict[str, Any]:
    """``rocketha demo --failover`` with every store, config and log under ``root``; returns
    the figures. ``messages``: the SIGKILL comes once half of them are acknowledged, the
    producer stops once all are and the old master is back in the SyncStateSet."""

    def step(text: str) -> None:
        if say is not None:
            print(f"demo: {text}", file=say, flush=True)

    (root / "logs").mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with ExitStack() as stack:
        step("starting 3 Apache RocketMQ controllers (the jars resolved with Maven on first use)")
        ctl = stack.enter_context(start_controllers(root / "controllers"))
        step(f"controllers {ctl.controller_addr}, DLedger leader {ctl.leader()}")
        namesrv = _Process(["namesrv", "--listen", "127.0.0.1:0"], root / "logs" / "namesrv.log")
        stack.callback(namesrv.stop)
        group = _Group(root, namesrv.started["listen"], ctl, segment_size)
        stack.callback(group.stop)
        for name in MEMBERS:
            proc = group.start(name)
            step(f"broker {name} at {proc.started['listen_address']}: {proc.started['role']}")
        formed = group.formed()
        step(f"the controller's group: {group.describe(formed)}")
        sender = _Sender(namesrv.started["listen"], topic, size)
        stack.callback(sender.stop)
        figures = _fail_over(group, sender, formed, messages, step)
        step("stopping the producer, the brokers, the name server and the controllers")
    figures["acked"] = len(sender.acked)
    figures.update(_failures(root / "logs" / "producer.log", sender, figures.pop("killed_at")))
    figures.update(_held(root, figures["new_master"], {b for _, _, b in sender.acked}))
    figures["seconds_in_all"] = round(time.monotonic() - began, 1)
    return figures


def _fail_over(
    group: _Group,
    sender: _Sender,
    formed: GroupState,
    messages: int,
    step: Callable[[str], None],
) -> dict[str, Any]:
    """The SIGKILL of the master once half the messages are acknowledged, the election, the
    first send on the new master, the old master's return; the timings."""
    until(lambda: len(sender.acked) >= messages // 2, f"{messages // 2} acknowledged sends")
    old = formed.master_address or ""
    old_name = group.names[old]
    step(f"{len(sender.acked)} sends acknowledged; SIGKILL of the master {old_name} ({old})")
    killed = time.monotonic()
    group.kill(old)
    dead = time.monotonic()

    def elected() -> GroupState | None:
        state = group.state()
        return state if state and state.master_address not in (None, old) else None

    new = until(elected, "a new master elected by the controller")
    elected_s = time.monotonic() - killed
    step(f"elected after {elected_s:.2f} s: {group.describe(new)}")
    # A send started once the old master was reaped can only be answered by the new one.
    first = until(lambda: sender.first_ack_of_a_send_after(dead), "a SEND_OK on the new master")
    step(f"first SEND_OK on the new master {first - killed:.2f} s after the SIGKILL")
    restarted = time.monotonic()
    back = group.start(old_name)
    step(f"{old_name} restarted at {back.started['listen_address']}: {back.started['role']}")
    healed = group.formed()
    rejoined_s = time.monotonic() - restarted
    step(f"{old_name} back in the SyncStateSet after {rejoined_s:.2f} s: {group.describe(healed)}")
    until(lambda: len(sender.acked) >= messages, f"{messages} acknowledged sends")
    return {
        "killed_at": killed,
        "killed_master": f"{old_name} ({old})",
        "killed_master_broker_id": formed.master_id,
        "sync_state_set_before": sorted(r.broker_id for r in formed.in_sync),
        "new_master": group.names[new.master_address or ""],
        "new_master_broker_id": new.master_id,
        "new_master_was_in_sync_state_set": new.master_id in {r.broker_id for r in formed.in_sync},
        "seconds_to_new_master": round(elected_s, 3),
        "seconds_to_first_send_on_new_master": round(first - killed, 3),
        "old_master_restarted_as": back.started["role"],
        "seconds_to_rejoin_sync_state_set": round(rejoined_s, 3),
        "sync_state_set_after": sorted(r.broker_id for r in healed.in_sync),
    }


def _failures(log: Path, sender: _Sender, killed: float) -> dict[str, Any]:
    """The failed sends by error, each written to ``log`` with its time from the SIGKILL."""
    with log.open("a") as out:
        for started, error in sender.failures:
            print(f"{started - killed:+.3f} s  {error}", file=out)
    kinds = Counter(error.split(":", 1)[0] for _, error in sender.failures)
    return {"failed_sends": len(sender.failures), "failed_sends_by_error": dict(kinds)}


def _held(root: Path, new_master: str, acked: set[bytes]) -> dict[str, Any]:
    """How many of the acknowledged messages each broker's store holds (all are stopped),
    and how many the new master lacks: the lost ones."""
    held: dict[str, int] = {}
    lost = 0
    for name in MEMBERS:
        with MessageStore(root / name, read_only=True) as store:
            stored = {msg.body for msg in store.messages()}
        held[name] = len(acked & stored)
        if name == new_master:
            lost = len(acked - stored)
    return {"acked_held_by": held, "lost": lost}


def print_failover_summary(summary: dict[str, Any], *, as_json: bool) -> int:
    """Prints ``demo --failover``'s figures; 0 when a member of the SyncStateSet took over,
    sends went on there, nothing acknowledged was lost and the old master came back as a
    slave."""
    ok = (
        summary["new_master_was_in_sync_state_set"]
        and summary["lost"] == 0
        and summary["acked"] > 0
        and summary["old_master_restarted_as"] == "SLAVE"
        and len(summary["sync_state_set_after"]) == 3
    )
    if as_json:
        print(json.dumps(summary, indent=2))
        return 0 if ok else 1
    print("rocketha demo --failover: 3 RocketMQ controllers, 3 rocketha brokers, 127.0.0.1")
    for key, value in summary.items():
        print(f"  {key:42} {value}")
    print(
        "OK: a member of the SyncStateSet took over, no acknowledged message was lost, "
        "the old master rejoined as a slave"
        if ok
        else "FAILED: see the figures above"
    )
    return 0 if ok else 1


__all__ = ["GROUP", "print_failover_summary", "run", "run_failover"]
