"""``rocketha demo``: the whole picture on loopback, as processes.

A name server; a SYNC_MASTER; a SLAVE that learns its master from the name server; producers
in their own processes (``rocketha produce``); then a :class:`~rocketha.consumer.PullConsumer`
that the master redirects to the slave (``slaveReadEnable``, and an
``accessMessageInMemoryMaxRatio`` of 0 so that any consumer behind the head counts as slow).
Halfway through, the master is stopped; the consumer carries on from the slave. The summary
says how many messages were sent and acknowledged, from which broker each was consumed,
whether every acknowledged message arrived exactly once, and whether the replica's commit log
is byte-identical to the master's.
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
from rocketha.consumer import MASTER_ID, ConsumeFromWhere, PullConsumer
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


__all__ = ["run"]
