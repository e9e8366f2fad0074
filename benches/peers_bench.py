"""``rocketha bench peers`` (issue 14): rocketha beside Apache RocketMQ and Apache Kafka, in one
run on one machine, under the same kind of load: 1 KiB messages sent synchronously over 1, 8
and 64 connections, each send waiting for its acknowledgement.

- rocketha SYNC_MASTER + SLAVE (``rocketha namesrv`` and two ``rocketha broker`` processes) and
  Apache RocketMQ 5.4.0 SYNC_MASTER + SLAVE, both driven by the remoting scenario's load
  generator (``benches.remoting._load``: whichever generator that scenario uses, so the two
  always share one);
- Kafka 4.3.1, two KRaft brokers, a topic of one partition with replication factor 2 and
  ``min.insync.replicas=2``, ``acks=all``: ``KafkaPeer load``, the same loop on the Kafka
  producer, one producer (so one connection to the leader) per connection, each with
  ``max.in.flight.requests.per.connection=1`` and ``send().get()``: one message in flight per
  connection, as a synchronous RocketMQ producer has;
- ASYNC_MASTER (RocketMQ's too) and Kafka ``acks=1`` at 64 connections: the same without the
  wait for the replica;
- RocketMQ's own benchmark shape (issue 30): one Java ``DefaultMQProducer``, so one connection,
  shared by 1, 8 and 64 sending threads (``Load.java`` with a thread count), against both
  SYNC_MASTER pairs, with the client JVM's CPU time beside: many requests in flight on one
  connection, where the many-connections figures have one each;
- the replicas (:func:`_replicas`): an empty one catching up with 1 GiB of 1 KiB messages, then
  one consumer draining the head of that log from a replica (RocketMQ's slave through
  ``suggestWhichBrokerId``, Kafka's follower through ``client.rack``).

Figures are rocketha's, with a peer's as the baseline: throughput ratios above 1 and latency
ratios below 1 mean rocketha is ahead. Targets (issue 14): >= 1.5x RocketMQ's and >= 1x Kafka's
acknowledged msgs/s at 64 connections, p99 <= 0.5x RocketMQ's at 1 connection; issue 30: >= 1.5x
RocketMQ's acked msgs/s and p99 <= 0.5x with 64 threads on one shared producer. The CPU time
every process used during each load is printed beside (what bounds a figure on 2 cores).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketha import ConsumeFromWhere, PullConsumer, _children

from benches import remoting
from benches.common import Figure, peer_rocketmq, skip_figure
from benches.peers import kafka, rocketmq

SCENARIO = "peers"
CONNECTIONS = remoting.CONNECTIONS
#: The wait-free variants are measured where the difference matters most.
ASYNC_CONNECTIONS = (64,)

#: The JVM a RocketMQ user runs (its runbroker.sh: G1, full JIT, heap pre-touched) with a heap
#: that fits 2 shared cores beside the other processes; the harness's default (serial GC, C1
#: only) is for quick starts in tests, and would handicap the peer here.
ROCKETMQ_JVM = [
    "-Xms512m",
    "-Xmx512m",
    "-XX:MaxDirectMemorySize=512m",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30",
    "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:+AlwaysPreTouch",
    "-XX:-UsePerfData",
]
#: RocketMQ's broker.conf for a 2-core box: one send thread per core with the reentrant put
#: lock its docs pair with more than one, ASYNC_FLUSH (durability by the slave, as ours), and
#: a send queue wait that does not turn a 64-connection burst into SYSTEM_BUSY.
ROCKETMQ_TUNING: dict[str, Any] = {
    "sendMessageThreadPoolNums": 2,
    "useReentrantLockWhenPutMessage": "true",
    "flushDiskType": "ASYNC_FLUSH",
    "waitTimeMillsInSendQueue": 1000,
}

#: Each system's name -> the connection counts it is loaded with.
SYSTEMS = {
    "rocketha SYNC_MASTER": CONNECTIONS,
    "RocketMQ SYNC_MASTER": CONNECTIONS,
    "Kafka acks=all": CONNECTIONS,
    "rocketha ASYNC_MASTER": ASYNC_CONNECTIONS,
    "RocketMQ ASYNC_MASTER": ASYNC_CONNECTIONS,
    "Kafka acks=1": ASYNC_CONNECTIONS,
}

#: RocketMQ's own benchmark shape: threads sharing one Java producer, against these systems.
SHARED_PRODUCER_THREADS = (1, 8, 64)
SHARED_PRODUCER_SYSTEMS = ("rocketha SYNC_MASTER", "RocketMQ SYNC_MASTER")

Load = Callable[[int, Path], dict[str, Any]]
#: Replication: an empty slave catching up with this much of a master's log (issue: 1 GiB).
CATCH_UP_BYTES = 1 << 30
CATCH_UP_BYTES_QUICK = 128 << 20


def _children_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of every live child process by a short label ("rocketha
    master", "BrokerStartup s", "Kafka broker-2"), plus "load generator": the reaped children
    (the load generator is the only child that ends during a load)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    me = str(os.getpid())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # it ended while we looked
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[1] != me:
            continue
        out[_label(argv)] = (int(fields[11]) + int(fields[12])) / tick
    t = os.times()
    out["load generator"] = t.children_user + t.children_system
    return out


def _label(argv: list[str]) -> str:
    """A process's short name from its command line: rocketha's role (its .properties file),
    a JVM's main class and the directory of its last argument (its conf)."""
    args = [a for a in argv if a]
    if "rocketha" in args:
        rest = args[args.index("rocketha") + 1 :]
        conf = [a for a in rest if a.endswith(".properties")]
        return f"rocketha {Path(conf[0]).stem if conf else rest[0]}"
    if "-cp" in args:
        main, *rest = args[args.index("-cp") + 2 :]
        where = Path(rest[-1]).parent.name if rest else ""
        return f"{main.rsplit('.', 1)[-1]} {where}".strip()
    return " ".join(args)[:40]


@contextlib.contextmanager
def _system(
    name: str,
    root: Path,
    loadgen: Path,
    rmq: rocketmq.RocketMQ,
    kfk: kafka.Kafka | None,
    seconds: float,
) -> Iterator[tuple[Load, Load | None]]:
    """Starts ``name``'s processes under ``root``; yields ``load(connections, home)`` and, for
    a RocketMQ-protocol pair, ``shared(threads, home)``: the Java client's one producer shared
    by ``threads`` senders (its JSON line), with under ``"pipelined"`` the generator's on one
    connection with ``threads`` requests in flight."""
    if name.startswith("Kafka"):
        assert kfk is not None
        peer, acks = kfk, name.split("=")[1]  # peer: not Optional inside the closure
        with peer.cluster(root, remoting.TOPIC) as cluster:

            def kafka_load(n: int, home: Path) -> dict[str, Any]:
                r = peer.load(cluster.bootstrap, remoting.TOPIC, n, seconds, home=home, acks=acks)
                if r["ok"] != r["sent"] or not r["sent"]:
                    raise RuntimeError(f"{n} connections: not every send acked: {r['statuses']}")
                return r

            yield kafka_load, None
        return
    role = name.split()[1]
    pair = (
        remoting.rocketmq_pair(rmq, root, role, ROCKETMQ_JVM, **ROCKETMQ_TUNING)
        if name.startswith("RocketMQ")
        else remoting.rocketha_pair(root, role)
    )
    with pair as at:

        def shared(threads: int, home: Path) -> dict[str, Any]:
            r = rmq.load(
                at.namesrv,
                remoting.TOPIC,
                1,
                seconds,
                home=home,
                broker=at.address,
                threads=threads,
                # The client's JIT: each load is a JVM of its own.
                warmup=2.0,
            )
            if r["ok"] != r["sent"] or not r["sent"]:
                raise RuntimeError(f"{threads} threads: not every send acked: {r['statuses']}")
            # The broker's part of the shape: one connection with as many requests in flight
            # from the lean generator instead of the Java client.
            pipelined = remoting._load(loadgen, at, 1, seconds, create_topic=False, depth=threads)
            return r | {"pipelined": pipelined}

        yield lambda n, home: remoting._load(loadgen, at, n, seconds, create_topic=True), shared


def _follow(
    address: Callable[[], str | None], target: int, stop: threading.Event
) -> list[tuple[float, int]]:
    """Polls the broker at ``address()`` (None until it is known) for its
    ``commitLogMaxOffset`` (GET_BROKER_RUNTIME_INFO) every 5 ms until it reaches ``target`` or
    ``stop``; (time, offset) samples from its first answer on."""
    samples: list[tuple[float, int]] = []
    while not stop.is_set():
        at = address()
        try:
            offset = int(remoting.runtime_info(at)["commitLogMaxOffset"]) if at else None
        except (OSError, RuntimeError, KeyError, ValueError):
            offset = None  # not listening yet, or not answering yet (an empty body)
        if offset is not None:
            samples.append((time.perf_counter(), offset))
            if offset >= target:
                break
        stop.wait(0.005)
    return samples


def _catch_up(
    address: Callable[[], str | None], start_slave: Callable[[], object], target: int
) -> tuple[int, float]:
    """Runs ``start_slave()`` (an empty slave that will listen on ``address()``) and times its
    catch-up to ``target``: from the first poll that sees data to the first that sees
    ``target``, so neither side's start-up (a JVM takes seconds; a 5.x slave is told its
    master only after it booted) is counted. Returns (bytes, seconds) of that stretch."""
    stop = threading.Event()
    result: list[list[tuple[float, int]]] = []
    poller = threading.Thread(target=lambda: result.append(_follow(address, target, stop)))
    poller.start()
    try:
        start_slave()
        poller.join(300)
    finally:
        stop.set()
        poller.join()
    samples = [s for s in result[0] if s[1] > 0]
    if not samples or samples[-1][1] < target:
        raise RuntimeError(f"the slave did not reach {target} in 300 s: {samples[-3:]}")
    (t0, o0), (t1, _) = samples[0], samples[-1]
    if t1 == t0:
        raise RuntimeError(f"catch-up of {target} bytes ended between two polls (5 ms)")
    return target - o0, t1 - t0


def _fill(loadgen: Path, at: remoting.Servers, size: int) -> int:
    """Sends 1 KiB messages with the load generator until the master's log holds ``size``
    bytes; its max offset then."""
    while (end := int(remoting.runtime_info(at.address)["commitLogMaxOffset"])) < size:
        remoting._load(loadgen, at, 8, 2.0, create_topic=True)
    return end


def _conf_port(conf: Path) -> str | None:
    """The ``listenPort`` a broker.conf names, once the file is written."""
    try:
        keys = dict(line.split("=", 1) for line in conf.read_text().splitlines() if "=" in line)
    except FileNotFoundError:
        return None
    return f"127.0.0.1:{keys['listenPort']}" if "listenPort" in keys else None


#: Pairs whose brokers send a consumer that lags to the slave and keep it there: any lag counts
#: as "not in memory" (as ``bench consume``'s end-to-end figure sets both); only the first pull
#: reaches the master. rocketha's slave syncs the topic, created by the fill, within a second.
READ_FROM_SLAVE: dict[str, Any] = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}
ROCKETHA_SLAVE_SYNC = {"slaveSyncInterval": 1000}
#: How long a drain may take before the figure is abandoned.
DRAIN_TIMEOUT = 600.0
#: Messages (1 KiB bodies) a consumer drains from the head of the filled log: 64 MiB, as a
#: RocketMQ slave served them at under 1 MB/s here (the whole 1 GiB would take half an hour).
DRAIN_MESSAGES = 1 << 16
DRAIN_MESSAGES_QUICK = 1 << 14


def _drain_rocketha(namesrv: str, messages: int) -> dict[str, Any]:
    """rocketha's ``PullConsumer`` reading ``messages`` messages of the bench topic from the
    first offset: Drain.java's figures (bodies' bytes, timed from the first poll that returned
    messages)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    got = pulled = 0
    first = last = 0.0
    with PullConsumer(
        namesrv,
        "bench-drain",
        remoting.TOPIC,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        while got < messages:
            if time.monotonic() > deadline:
                raise RuntimeError(f"drained {got} of {messages} messages")
            timed = got > 0
            msgs = consumer.poll(1.0, max_messages=4096)
            got += len(msgs)
            if timed:
                pulled += sum(len(m.body) for m in msgs)
            last = time.perf_counter()
            if not timed and got:
                first = last
    return {"messages": got, "bytes": pulled, "seconds": last - first}


def _replicas(
    system: str,
    root: Path,
    loadgen: Path,
    rmq: rocketmq.RocketMQ,
    kfk: kafka.Kafka | None,
    size: int,
    drain: int,
) -> dict[str, float]:
    """What each system's replica does with ``size`` bytes of 1 KiB messages, in MB/s:
    ``catch_up``, an empty replica catching up, and ``drain``, one consumer reading the first
    ``drain`` of them from a replica, with ``from_replica`` the share of messages the replica
    served; for rocketha also ``drain_java``, RocketMQ's Java consumer reading the same.
    rocketha and RocketMQ: an ASYNC_MASTER + SLAVE pair (:data:`READ_FROM_SLAVE`) is filled by
    the load generator, a second, empty slave (brokerId 2) joins, then a consumer drains the
    topic, sent to the first slave by the master. Kafka: a follower is added to a filled
    partition (``KafkaPeer catchup``), then a consumer reads it with the follower's rack."""
    if system == "Kafka":
        assert kfk is not None
        with kfk.cluster(root, remoting.TOPIC) as cluster:
            c = kfk.catch_up(cluster.bootstrap, "CatchUp", size, home=root / "catch-up")
            # After the reassignment to [1, 2], broker 1 leads and broker 2 follows.
            d = kfk.drain(cluster.bootstrap, "CatchUp", drain, 2, home=root / "drain")
            total = sum(d["node_bytes"].values())
            return {
                "catch_up": c["bytes"] / c["seconds"] / 1e6,
                "drain": d["bytes"] / d["seconds"] / 1e6,
                "from_replica": d["node_bytes"].get("node-2", 0) / total if total else 0.0,
            }
    with contextlib.ExitStack() as stack:
        if system == "RocketMQ":
            at = stack.enter_context(
                remoting.rocketmq_pair(
                    rmq, root, "ASYNC_MASTER", ROCKETMQ_JVM, **ROCKETMQ_TUNING, **READ_FROM_SLAVE
                )
            )
            end = _fill(loadgen, at, size)
            # The harness gives a broker HA on listenPort + 1.
            ha = f"127.0.0.1:{int(at.address.rsplit(':', 1)[1]) + 1}"
            slave = root / "s2"
            done, took = _catch_up(
                lambda: _conf_port(slave / "broker.conf"),
                lambda: stack.enter_context(
                    rmq.broker(
                        slave,
                        jvm=ROCKETMQ_JVM,
                        namesrvAddr=at.namesrv,
                        brokerName="bench-a",
                        brokerRole="SLAVE",
                        brokerId=2,
                        mappedFileSizeCommitLog=remoting.SEGMENT,
                        haMasterAddress=ha,
                        **ROCKETMQ_TUNING,
                    )
                ),
                end,
            )
            d = rmq.drain(at.namesrv, remoting.TOPIC, drain, home=root / "drain")
            extra = {}
        else:
            keys = READ_FROM_SLAVE | ROCKETHA_SLAVE_SYNC
            at = stack.enter_context(remoting.rocketha_pair(root, "ASYNC_MASTER", **keys))
            end = _fill(loadgen, at, size)
            conf = root / "slave2.properties"
            port = rocketmq.free_ports(1)
            slave2 = {
                "brokerName": "bench-a",
                "namesrvAddr": at.namesrv,
                "listenPort": port,
                "mappedFileSizeCommitLog": remoting.SEGMENT,
                "brokerRole": "SLAVE",
                "brokerId": 2,
                "storePathRootDir": root / "slave2",
            }
            conf.write_text("".join(f"{k}={v}\n" for k, v in slave2.items()))
            done, took = _catch_up(
                lambda: f"127.0.0.1:{port}",
                lambda: stack.callback(
                    remoting._Process(root / "slave2.log", "broker", "-c", str(conf)).stop
                ),
                end,
            )
            d = _drain_rocketha(at.namesrv, drain)
            # The same client as RocketMQ's figure: which part is the broker's.
            j = rmq.drain(at.namesrv, remoting.TOPIC, drain, home=root / "drain", group="java")
            extra = {"drain_java": j["bytes"] / j["seconds"] / 1e6}
        # What the master answered itself (each consumer's first pull, at most); the slave
        # served the rest.
        by_master = int(remoting.runtime_info(at.address)["msgGetTotalTodayNow"])
        return {
            "catch_up": done / took / 1e6,
            "drain": d["bytes"] / d["seconds"] / 1e6,
            "from_replica": 1 - by_master / (drain * (1 + len(extra))),
            **extra,
        }


@dataclass
class _Loads:
    """Every load's figures, each a list with one value a run: ``rates`` (acked msgs/s) by
    (system, connections), ``lat`` (the 1-connection latencies, us) by (system, quantile),
    ``cpu`` (each process's CPU seconds during the last run's load) by (system, connections),
    and ``shared``, the shared-producer loads' JSON lines by (system, threads)."""

    rates: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    lat: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    cpu: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    shared: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)

    def measure(
        self, system: str, counts: tuple[int, ...], load: Load, shared: Load | None, d: Path
    ) -> None:
        """``system``'s loads, one a connection count, then (:data:`SHARED_PRODUCER_SYSTEMS`)
        the shared-producer ones."""
        # A JVM's first seconds run interpreted and C1 code (Kafka's 1-connection p50 was 7.5
        # ms first, 1.2 ms after a warm-up): every system gets one unmeasured load first, so the
        # peers are measured with their JIT warm.
        load(8, d / "warm-up")
        for n in counts:
            before, started = _children_cpu(), time.perf_counter()
            r = load(n, d / f"load-{n}")
            wall = time.perf_counter() - started
            after = _children_cpu()
            # CPU seconds of each process, and the load's wall time beside.
            self.cpu[(system, n)] = {
                f"cpu_s {k}": round(v - before.get(k, 0.0), 2) for k, v in after.items()
            } | {"wall_s": round(wall, 2)}
            self.rates.setdefault((system, n), []).append(r["ok"] / r["seconds"])
            if n == 1:
                for q in ("p50", "p99", "p999"):
                    self.lat.setdefault((system, q), []).append(r[f"{q}_us"])
        if shared is None or system not in SHARED_PRODUCER_SYSTEMS:
            return
        for threads in SHARED_PRODUCER_THREADS:
            r = shared(threads, d / f"shared-{threads}")
            self.shared.setdefault((system, threads), []).append(r)


def run(quick: bool, runs: int) -> list[Figure]:
    rmq = peer_rocketmq("the peers (RocketMQ, Kafka) are Java")
    loadgen = remoting.loadgen_binary()
    failed: dict[str, str] = {}
    kfk: kafka.Kafka | None = None
    try:
        kfk = kafka.Kafka.resolve()
    except (rocketmq.Unavailable, RuntimeError) as e:
        failed["Kafka"] = f"{type(e).__name__}: {str(e)[:500]}"
    seconds = 3.0 if quick else 10.0
    loads = _Loads()
    # system -> figure ("catch_up", "drain", "from_replica") -> one value a run
    replica: dict[str, dict[str, list[float]]] = {}
    replica_failed: dict[str, str] = {}
    size = CATCH_UP_BYTES_QUICK if quick else CATCH_UP_BYTES
    drain = DRAIN_MESSAGES_QUICK if quick else DRAIN_MESSAGES
    for _ in range(runs):
        for system, counts in SYSTEMS.items():
            peer = system.split()[0]
            if peer in failed:
                continue
            with _children.temp_run_dir("bench-peers-bench") as d:
                try:
                    with _system(system, Path(d), loadgen, rmq, kfk, seconds) as (load, shared):
                        loads.measure(system, counts, load, shared, Path(d))
                except Exception as e:
                    if peer == "rocketha":
                        raise
                    # A peer is the comparison, not the figure under test: report it missing.
                    failed[peer] = f"{type(e).__name__}: {str(e)[:500]}"
        for system in ("rocketha", "RocketMQ", "Kafka"):
            if system in failed or system in replica_failed:
                continue
            with _children.temp_run_dir("bench-peers-bench") as d:
                try:
                    got = _replicas(system, Path(d), loadgen, rmq, kfk, size, drain)
                except Exception as e:
                    if system == "rocketha":
                        raise
                    replica_failed[system] = f"{type(e).__name__}: {str(e)[:500]}"
                    continue
                for k, v in got.items():
                    replica.setdefault(system, {}).setdefault(k, []).append(v)
    for (system, n), used in loads.cpu.items():
        print(f"peers: during the load, {system}, {n} conns: {used}", file=sys.stderr)
    for peer, reason in failed.items():
        skip_figure(SCENARIO, f"every figure against {peer}", reason)
    for peer, reason in replica_failed.items():
        skip_figure(SCENARIO, f"replica catch-up and drain against {peer}", reason)
    figs = _figures(rmq.version, kfk.version if kfk else kafka.VERSION, loads, runs)
    figs += _shared_figures(rmq.version, loads, runs)
    replicas = {"RocketMQ": f"RocketMQ {rmq.version} slave", "Kafka": "Kafka follower"}
    for peer, name in replicas.items():
        if peer not in replica:
            continue
        ours, theirs = replica["rocketha"], replica[peer]
        mib = f"{size >> 20} MiB of 1 KiB messages"
        figs.append(
            Figure(
                SCENARIO,
                f"rocketha slave vs {name}, empty replica catch-up of {mib}",
                "MB/s",
                ours["catch_up"],
                name,
                theirs["catch_up"],
            )
        )
        figs.append(
            Figure(
                SCENARIO,
                f"rocketha slave vs {name}, one consumer draining the first {drain >> 10} MiB",
                "MB/s",
                ours["drain"],
                name,
                theirs["drain"],
                # The share of the messages the replica served (the rest: the master's first
                # answer, or Kafka's metadata and first fetch from the leader).
                series={
                    "from_replica": ours["from_replica"],
                    "peer from_replica": theirs["from_replica"],
                    "rocketha slave, Java DefaultLitePullConsumer MB/s": ours["drain_java"],
                },
            )
        )
    return figs


def _figures(rmq_version: str, kafka_version: str, got: _Loads, runs: int) -> list[Figure]:
    rates, lat, cpu = got.rates, got.lat, got.cpu
    # peer -> (its name and version, the 64-connection target, its acked and wait-free modes)
    peers = {
        "RocketMQ": (f"RocketMQ {rmq_version}", ">= 1.5", "SYNC_MASTER", "ASYNC_MASTER"),
        "Kafka": (f"Kafka {kafka_version}", ">= 1", "acks=all", "acks=1"),
    }
    figs = []
    for peer, (label, target, sync, wait_free) in peers.items():
        for ours, theirs, counts in (
            ("SYNC_MASTER", sync, CONNECTIONS),
            ("ASYNC_MASTER", wait_free, ASYNC_CONNECTIONS),
        ):
            for n in counts:
                key = (f"{peer} {theirs}", n)
                if len(rates.get(key, [])) != runs:
                    continue
                conns = f"{n} connection{'s' if n > 1 else ''}"
                figs.append(
                    Figure(
                        SCENARIO,
                        f"rocketha {ours} vs {label} {theirs}, acked msgs/s, {conns}",
                        "msgs/s",
                        rates[(f"rocketha {ours}", n)],
                        f"{label} {theirs}",
                        rates[key],
                        target=target if n == 64 and ours == "SYNC_MASTER" else None,
                        series={k: [v] for k, v in cpu.get((f"rocketha {ours}", n), {}).items()}
                        | {f"peer {k}": [v] for k, v in cpu.get(key, {}).items()},
                    )
                )
        for q in ("p50", "p99", "p999"):
            theirs_q = (f"{peer} {sync}", q)
            if len(lat.get(theirs_q, [])) != runs:
                continue
            figs.append(
                Figure(
                    SCENARIO,
                    f"rocketha SYNC_MASTER vs {label} {sync}, send {q}, 1 connection",
                    "us",
                    lat[("rocketha SYNC_MASTER", q)],
                    f"{label} {sync}",
                    lat[theirs_q],
                    higher_is_better=False,
                    target="<= 0.5" if peer == "RocketMQ" and q == "p99" else None,
                )
            )
    return figs


def _shared_figures(rmq_version: str, got: _Loads, runs: int) -> list[Figure]:
    """RocketMQ's own benchmark shape, rocketha's SYNC_MASTER pair against RocketMQ's: acked
    msgs/s and p99 at each thread count on one shared Java producer, with the client JVM's CPU
    seconds and its CPU per acked send beside (the client is a suspect bound, issue 30); then
    the same with the generator on one connection with as many sends in flight, which leaves
    the brokers' part."""
    label = f"RocketMQ {rmq_version} SYNC_MASTER"
    figs = []
    for threads in SHARED_PRODUCER_THREADS:
        ours = got.shared.get((SHARED_PRODUCER_SYSTEMS[0], threads), [])
        theirs = got.shared.get((SHARED_PRODUCER_SYSTEMS[1], threads), [])
        if len(theirs) != runs or len(ours) != runs:
            continue
        shape = f"one DefaultMQProducer shared by {threads} thread{'s' if threads > 1 else ''}"

        def client(rs: list[dict[str, Any]], prefix: str) -> dict[str, list[float]]:
            return {
                f"{prefix}client cpu_s": [r["cpu_s"] for r in rs],
                f"{prefix}client cpu_us per acked send": [r["cpu_s"] / r["ok"] * 1e6 for r in rs],
            }

        figs.append(
            Figure(
                SCENARIO,
                f"rocketha SYNC_MASTER vs {label}, acked msgs/s, {shape}",
                "msgs/s",
                [r["ok"] / r["seconds"] for r in ours],
                label,
                [r["ok"] / r["seconds"] for r in theirs],
                target=">= 1.5" if threads == 64 else None,
                series=client(ours, "") | client(theirs, "peer "),
            )
        )
        figs.append(
            Figure(
                SCENARIO,
                f"rocketha SYNC_MASTER vs {label}, send p99, {shape}",
                "us",
                [r["p99_us"] for r in ours],
                label,
                [r["p99_us"] for r in theirs],
                higher_is_better=False,
                target="<= 0.5" if threads == 64 else None,
            )
        )
        if threads == 1:
            continue  # the generator's 1 in flight on 1 connection is the 1-connection figure
        # The same shape without the Java client: what the brokers give it.
        piped = f"1 connection, {threads} sends in flight (the generator)"
        for what, unit, key, better in (
            ("acked msgs/s", "msgs/s", "ok_per_s", True),
            ("send p99", "us", "p99_us", False),
        ):
            figs.append(
                Figure(
                    SCENARIO,
                    f"rocketha SYNC_MASTER vs {label}, {what}, {piped}",
                    unit,
                    [r["pipelined"][key] for r in ours],
                    label,
                    [r["pipelined"][key] for r in theirs],
                    higher_is_better=better,
                )
            )
    return figs
