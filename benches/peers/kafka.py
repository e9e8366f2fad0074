"""Apache Kafka as a peer: a 2-broker KRaft cluster on 127.0.0.1 and a synchronous load
generator on the Kafka producer, for ``rocketha bench peers``.

It shares the RocketMQ harness's machinery (``rocketmq.py``: Maven resolution into ``~/.m2``
with a cached classpath, compilation of the Java side, free ports, JVM processes stopped on
the way out and at interpreter exit). The pinned jars (``java/kafka/pom.xml``: ``kafka_2.13``
and ``kafka-tools``) are resolved once and cached under ``~/.cache/rocketha/kafka/<version>/``
beside the compiled ``java/kafka/KafkaPeer.java``.

>>> kafka = Kafka.resolve()
>>> with kafka.cluster(tmp / "kafka", "T") as cluster:
...     r = kafka.load(cluster.bootstrap, "T", 8, 3.0, home=tmp / "load")

Each broker is a combined KRaft node (``process.roles=broker,controller``: the smallest
cluster that has both a quorum and two replicas, two JVMs), with the settings in
:data:`BROKER_CONF` (why each, in ``benches/README.md``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketha import _children

from benches.peers.rocketmq import (
    CACHE,
    JAVA_DIR,
    JDK17_FLAGS,
    JavaProcess,
    Unavailable,
    compile_java,
    free_ports,
    maven_classpath,
    missing_tools,
    retry_ports,
)

#: The newest Kafka whose broker and tools jars both resolve from Maven Central (4.4.0's
#: kafka-tools is not served there).
VERSION = "4.3.1"
KAFKA_JAVA = JAVA_DIR / "kafka"

#: What a user of a 2-core box sets (Kafka's defaults otherwise): threads to match the cores,
#: one replica fetcher, durability by replication (no fsync per message: the default, as our
#: brokers and RocketMQ's ASYNC_FLUSH), one 1 GiB segment so no roll inside a measurement.
BROKER_CONF: dict[str, Any] = {
    "num.network.threads": 2,
    "num.io.threads": 2,
    "num.replica.fetchers": 1,
    "background.threads": 2,
    "log.segment.bytes": 1 << 30,
    "offsets.topic.replication.factor": 2,
    "transaction.state.log.replication.factor": 2,
    "transaction.state.log.min.isr": 2,
    "min.insync.replicas": 2,
    "default.replication.factor": 2,
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": 0,
    # Follower fetching (KIP-392): a consumer with a follower's client.rack reads from it.
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
}

#: Kafka's own start script's JVM (G1, 20 ms pause target) with a heap that fits 2 shared
#: cores beside RocketMQ's and the load generator's.
JVM_FLAGS = [
    "-Xms512m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
]


@dataclass
class Cluster:
    """Started brokers; ``bootstrap`` is every broker's client address."""

    brokers: list[JavaProcess]
    ports: list[int]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)


class Kafka:
    """The pinned Kafka, resolved and compiled."""

    _resolved: dict[str, Kafka] = {}  # a process-wide cache

    def __init__(self, version: str, classpath: str, classes: Path) -> None:
        self.version = version
        self.classpath = classpath
        self.classes = classes

    @classmethod
    def resolve(cls, version: str = VERSION) -> Kafka:
        """Resolves (Maven, once per machine) and compiles (once per source) ``version``."""
        if version not in cls._resolved:
            why = missing_tools()
            if why:
                raise Unavailable(why)
            cache = CACHE.parent / "kafka" / version
            cp = maven_classpath(KAFKA_JAVA / "pom.xml", {"kafka.version": version}, cache)
            # Counts.java: the counting and JSON line Load.java prints too.
            sources = [*sorted(KAFKA_JAVA.glob("*.java")), JAVA_DIR / "Counts.java"]
            cls._resolved[version] = cls(version, cp, compile_java(sources, cp, cache))
        return cls._resolved[version]

    def _java(self, home: Path, main: str, args: Sequence[str], timeout: float) -> str:
        """Runs a short-lived tool JVM; its stdout, or RuntimeError with what it printed."""
        home.mkdir(parents=True, exist_ok=True)
        proc = _children.run(
            [
                "java",
                "-Xms256m",
                "-Xmx256m",
                "-XX:+UseParallelGC",
                "-XX:-UsePerfData",
                *JDK17_FLAGS,
                "-cp",
                f"{self.classes}{os.pathsep}{self.classpath}",
                main,
                *args,
            ],
            cwd=home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        (home / f"{main.rsplit('.', 1)[-1]}-{args[0]}.out").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{main} {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return proc.stdout

    def _start(self, root: Path, count: int, jvm: Sequence[str]) -> Cluster:
        """Formats and starts ``count`` combined KRaft nodes on fresh free ports."""
        base = free_ports(2 * count)
        ports = [base + 2 * i for i in range(count)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{p + 1}" for i, p in enumerate(ports))
        # A cluster id is a base64 (URL-safe, unpadded) UUID, as kafka-storage random-uuid.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        brokers: list[JavaProcess] = []
        try:
            for i, port in enumerate(ports):
                home = root / f"broker-{i + 1}"
                keys: dict[str, Any] = {
                    "process.roles": "broker,controller",
                    "node.id": i + 1,
                    "controller.quorum.voters": voters,
                    "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                    "controller.listener.names": "CONTROLLER",
                    "inter.broker.listener.name": "PLAINTEXT",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "log.dirs": home / "data",
                    "broker.rack": rack(i + 1),
                    **BROKER_CONF,
                }
                home.mkdir(parents=True, exist_ok=True)
                conf = home / "server.properties"
                conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
                self._java(
                    home,
                    "kafka.tools.StorageTool",
                    # One token: an id that starts with "-" (urlsafe base64 has it) would be
                    # read as an option after a separate -t.
                    ["format", f"--cluster-id={cluster_id}", "-c", str(conf)],
                    120,
                )
                brokers.append(JavaProcess(self.classpath, home, "kafka.Kafka", [str(conf)], jvm))
            for broker, port in zip(brokers, ports, strict=True):
                broker.wait_ready(port)
        except BaseException:
            for b in brokers:
                b.kill()
            raise
        return Cluster(brokers, ports)

    @contextlib.contextmanager
    def cluster(
        self,
        root: Path,
        topic: str,
        *,
        brokers: int = 2,
        partitions: int = 1,
        jvm: Sequence[str] = JVM_FLAGS,
        timeout: float = 120.0,
    ) -> Iterator[Cluster]:
        """``brokers`` KRaft brokers and ``topic`` with one replica on each broker and
        ``min.insync.replicas`` = ``brokers``, every partition's ISR full (waited for on the
        cluster's metadata); the brokers are killed on the way out, whatever happened (their
        logs are not read afterwards: a graceful shutdown only costs time)."""
        cluster = retry_ports(lambda: self._start(root, brokers, jvm))
        try:
            out = self._java(
                root / "admin",
                "KafkaPeer",
                [
                    "ready",
                    cluster.bootstrap,
                    str(brokers),
                    topic,
                    str(partitions),
                    str(brokers),
                    str(brokers),
                    str(timeout),
                ],
                timeout + 60,
            )
            if "READY" not in out.split():
                raise RuntimeError(f"KafkaPeer ready: {out}")
            yield cluster
        finally:
            for b in cluster.brokers:
                b.kill()

    def _result(self, command: str, args: list[str], timeout: float, home: Path) -> dict[str, Any]:
        """``KafkaPeer COMMAND ARGS``'s JSON line."""
        out = self._java(home, "KafkaPeer", [command, *args], timeout)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"KafkaPeer {command} {' '.join(args)} printed no result: {out}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def load(
        self,
        bootstrap: str,
        topic: str,
        connections: int,
        seconds: float,
        size: int = 1024,
        *,
        home: Path,
        warmup: float = 1.0,
        acks: str = "all",
    ) -> dict[str, Any]:
        """``KafkaPeer load``: ``connections`` synchronous producers (``acks``, one record in
        flight each) for ``seconds`` after ``warmup``; the JSON line of
        :meth:`benches.peers.rocketmq.RocketMQ.load`."""
        args = [bootstrap, topic, str(connections), str(seconds), str(size), str(warmup), acks]
        return self._result("load", args, seconds + warmup + 120 + connections, home)

    def catch_up(
        self, bootstrap: str, topic: str, size: int, *, home: Path, timeout: float = 300.0
    ) -> dict[str, Any]:
        """``KafkaPeer catchup``: a new one-partition ``topic`` on broker 1 alone, filled with
        ``size`` bytes of 1 KiB records, then broker 2 added as its replica; returns
        ``{"bytes": leader log size, "records": sent, "seconds": until broker 2 is in the
        ISR}``."""
        args = [bootstrap, topic, str(size), "1024", str(timeout)]
        return self._result("catchup", args, timeout + 120, home)

    def drain(
        self,
        bootstrap: str,
        topic: str,
        records: int,
        node: int,
        *,
        home: Path,
        timeout: float = 600.0,
    ) -> dict[str, Any]:
        """``KafkaPeer drain``: one consumer reads partition 0 of ``topic`` from its beginning
        until ``records`` records, fetching from broker ``node`` (its rack as ``client.rack``);
        returns ``{"messages", "bytes", "seconds", "node_bytes"}`` (values' bytes, timed from
        the first poll that returned records; node_bytes by ``node-<id>``)."""
        args = [bootstrap, topic, str(records), rack(node), str(timeout)]
        return self._result("drain", args, timeout + 120, home)


def rack(node: int) -> str:
    """Broker ``node``'s ``broker.rack``: one rack per broker."""
    return f"rack-{node}"


__all__ = ["BROKER_CONF", "JVM_FLAGS", "VERSION", "Cluster", "Kafka", "rack"]
