"""Acknowledged sends/s over the network (issue 12), 1 KiB messages: ``rocketha namesrv`` and a
SYNC_MASTER + SLAVE ``rocketha broker`` pair as processes, loaded by ``rocketha-loadgen``
(``benches/loadgen``, Rust, on rocketha-core's remoting codec): N connections, each with one
SEND_MESSAGE_V2 in flight (a synchronous producer), over 1, 8 and 64 connections. Targets:
>= 100,000 acked sends/s at 64 connections; at 1 connection, p50 <= 2.5x, p99 <= 4x and p999
<= 10x the loopback round trip (issue 30).

Baselines, all from the same run: an ASYNC_MASTER + SLAVE pair of rocketha brokers under the
same generator (the price of waiting for the slave); the *echo ceiling*, the same generator
against ``rocketha-loadgen echo``, a remoting server that only decodes each request's header and
answers an empty SUCCESS on one thread (what this machine gives synchronous request/response at
that connection count, whatever the broker does); the raw loopback round trip
(``tcp_ping_pong``); and, when Java and Maven can resolve it, Apache RocketMQ 5.4.0
SYNC_MASTER + SLAVE under the same generator (ratio rocketha / RocketMQ). The generator reports
the CPU seconds of itself and of every server process over the counted window, so each system's
CPU per acked send is a figure too. With Java, one row shows a real client: RocketMQ's own
``DefaultMQProducer`` (``benches/peers/java/Load.java``) sending synchronously on 1 connection.

Latency under load (issue 30): the SYNC_MASTER pair is then loaded open-loop, 64 connections
paced together at 10, 25, 50 and 75% of the acked rate it just reached at 64 connections, each
latency counted from when its send was due (``rocketha-loadgen send --rate``); the p99 at 50%
against the 1-connection p99 (idle) of the same run, target <= 2x."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rocketha import _children

from benches.common import Figure, Skipped, native_baselines, percentile
from benches.peers import rocketmq, wire

CONNECTIONS = (1, 8, 64)
#: Shares of the maximum acked rate the paced loads run at (64 connections).
LOAD_SHARES = (0.1, 0.25, 0.5, 0.75)
TOPIC = "BenchRemoting"
#: One commit log segment holds a whole run: no segment roll inside a measurement.
SEGMENT = 1 << 30
GET_BROKER_RUNTIME_INFO = 28
REPO = Path(__file__).resolve().parents[1]


class Servers:
    """What a load runs against: the name server, the address sends go to, and the processes
    whose CPU the generator reports, by name (the name server's process apart)."""

    def __init__(
        self, namesrv: str, address: str, pids: dict[str, int], namesrv_pid: int | None = None
    ) -> None:
        self.namesrv = namesrv
        self.address = address
        self.pids = pids
        self.namesrv_pid = namesrv_pid


class _Process:
    """``python -m rocketha ARGS`` whose first stdout line is ``{"started": {...}}``; stderr
    goes to ``log`` (a file: an undrained pipe would block the process)."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        with log.open("a") as err:
            self.proc = _children.spawn(
                [sys.executable, "-m", "rocketha", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            raise RuntimeError(f"rocketha {' '.join(args)} did not start: {log.read_text()}")
        self.started: dict[str, Any] = json.loads(line)["started"]

    def stop(self) -> None:
        _children.stop(self.proc, timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def runtime_info(address: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO over one remoting request (JSON header)."""
    table: dict[str, str] = wire.call(address, GET_BROKER_RUNTIME_INFO, timeout=10).json()["table"]
    return table


@contextlib.contextmanager
def rocketha_pair(root: Path, role: str, **keys: Any) -> Iterator[Servers]:
    """``rocketha namesrv``, a ``role`` master and a SLAVE that finds its master through the
    name server, as processes, both with the broker.conf ``keys`` too; yields them once the
    slave replicates.
    Every process is stopped on the way out, whatever happened."""
    root.mkdir(parents=True, exist_ok=True)
    procs: list[_Process] = []
    try:
        ns = _Process(root / "namesrv.log", "namesrv", "--listen", "127.0.0.1:0")
        procs.append(ns)
        namesrv = ns.started["listen"]
        common = {
            "brokerName": "bench-a",
            "namesrvAddr": namesrv,
            "listenPort": 0,
            "mappedFileSizeCommitLog": SEGMENT,
            "autoCreateTopicEnable": "true",
            **keys,
        }
        confs = {
            "master": {
                **common,
                "brokerRole": role,
                "storePathRootDir": root / "master",
                "haListenAddress": "127.0.0.1",
                "haListenPort": 0,
            },
            "slave": {
                **common,
                "brokerRole": "SLAVE",
                "brokerId": 1,
                "storePathRootDir": root / "slave",
            },
        }
        addresses, pids = {}, {}
        for name, conf_keys in confs.items():
            conf = root / f"{name}.properties"
            conf.write_text("".join(f"{k}={v}\n" for k, v in conf_keys.items()))
            broker = _Process(root / f"{name}.log", "broker", "-c", str(conf))
            procs.append(broker)
            addresses[name] = broker.started["listen_address"]
            pids[name] = broker.proc.pid
        deadline = time.monotonic() + 60
        while not runtime_info(addresses["master"]).get("slaveAckOffsets"):
            if time.monotonic() > deadline:
                raise RuntimeError("the slave did not connect to the master in 60 s")
            time.sleep(0.05)
        yield Servers(namesrv, addresses["master"], pids, ns.proc.pid)
    finally:
        for p in reversed(procs):
            p.stop()


@contextlib.contextmanager
def rocketmq_pair(
    rmq: rocketmq.RocketMQ,
    root: Path,
    role: str = "SYNC_MASTER",
    jvm: Sequence[str] = rocketmq.JVM_FLAGS,
    **tuning: Any,
) -> Iterator[Servers]:
    """Apache RocketMQ name server, ``role`` master and SLAVE; the brokers on ``jvm`` flags
    (default: the harness's small JVM) with ``tuning`` (broker.conf keys).
    ``inSyncReplicas=2``: a 5.x SYNC_MASTER with the default 1 answers without its slave."""
    store = {"mappedFileSizeCommitLog": SEGMENT, "brokerName": "bench-a", "inSyncReplicas": 2}
    store.update(tuning)
    with (
        rmq.namesrv(root / "ns") as ns,
        rmq.broker(root / "m", ns, jvm=jvm, brokerRole=role, **store) as master,
        rmq.broker(
            root / "s",
            ns,
            jvm=jvm,
            brokerRole="SLAVE",
            brokerId=1,
            haMasterAddress=master.ha_address,
            **store,
        ) as slave,
    ):
        yield Servers(
            ns.address,
            master.address,
            {"master": master.proc.pid, "slave": slave.proc.pid},
            ns.proc.pid,
        )


@contextlib.contextmanager
def _echo(loadgen: Path, root: Path) -> Iterator[Servers]:
    """``rocketha-loadgen echo`` on an OS-chosen port."""
    with (root / "echo.log").open("a") as err:
        proc = _children.spawn(
            [str(loadgen), "echo"], stdout=subprocess.PIPE, stderr=err, text=True
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"rocketha-loadgen echo did not start: {(root / 'echo.log').read_text()}"
            )
        yield Servers("", json.loads(line)["listen"], {"server": proc.pid})
    finally:
        _children.kill(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def loadgen_binary() -> Path:
    """``rocketha-loadgen``, built with cargo from ``benches/loadgen`` (a workspace member that
    rocketha's wheel does not contain); an up-to-date build costs a second."""
    if shutil.which("cargo") is None:
        raise Skipped(
            "the load generator is Rust (benches/loadgen): needs cargo on PATH (https://rustup.rs)"
        )
    build = ["cargo", "build", "--release", "--quiet", "-p", "rocketha-loadgen"]
    if _children.run(build, cwd=REPO).returncode != 0:
        raise RuntimeError(f"{' '.join(build)} failed (see cargo's output)")
    meta = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(json.loads(meta.stdout)["target_directory"]) / "release" / "rocketha-loadgen"


def _load(
    loadgen: Path,
    at: Servers,
    connections: int,
    seconds: float,
    *,
    create_topic: bool,
    rate: float | None = None,
    depth: int = 1,
) -> dict[str, Any]:
    """One run of the generator against ``at``, ``depth`` requests in flight a connection
    (paced at ``rate`` sends/s over all connections, if given); every answer must be
    SUCCESS."""
    command = [
        str(loadgen),
        "send",
        "--broker",
        at.address,
        "--connections",
        str(connections),
        "--seconds",
        str(seconds),
        "--topic",
        TOPIC,
        "--depth",
        str(depth),
    ]
    if create_topic:
        command.append("--create-topic")
    if rate is not None:
        command += ["--rate", str(rate)]
    for name, pid in at.pids.items():
        command += ["--watch", f"{name}={pid}"]
    proc = _children.run(command, capture_output=True, text=True, timeout=seconds + 180)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {proc.stderr[-3000:]}")
    r: dict[str, Any] = json.loads(proc.stdout)
    if not r["ok"] or r["ok"] != r["responses"]:
        raise RuntimeError(f"{connections} connections: not every send acked: {r['codes']}")
    return r


def _java_load(rmq: rocketmq.RocketMQ, at: Servers, seconds: float, home: Path) -> dict[str, Any]:
    """RocketMQ's own ``DefaultMQProducer``, one synchronous sender (``Load.java``)."""
    r: dict[str, Any] = rmq.load(at.namesrv, TOPIC, 1, seconds, 1024, home=home, broker=at.address)
    if r["ok"] != r["sent"] or not r["sent"]:
        raise RuntimeError(f"Java producer: not every send acked: {r['statuses']}")
    return r


def run(quick: bool, runs: int) -> list[Figure]:
    loadgen = loadgen_binary()
    baseline = native_baselines()
    try:
        rmq: rocketmq.RocketMQ | None = rocketmq.RocketMQ.resolve(rocketmq.VERSION_5)
    except rocketmq.Unavailable as e:
        print(f"remoting: Apache RocketMQ and the Java client left out: {e}", file=sys.stderr)
        rmq = None
    seconds = 3.0 if quick else 10.0
    peer = "RocketMQ SYNC_MASTER"
    systems = ["echo", "SYNC_MASTER", "ASYNC_MASTER"] + ([peer] if rmq else [])
    # (system, connections), and ("SYNC_MASTER paced", share of the maximum rate)
    results: dict[tuple[str, float], list[dict[str, Any]]] = {}
    java_p50: list[float] = []
    rtt_runs: list[float] = []
    peer_failed: str | None = None
    for _ in range(runs):
        rtt_runs.append(percentile(baseline.tcp_ping_pong(5000), 0.5) * 1e6)
        for system in systems:
            if system == peer and peer_failed:
                continue
            with _children.temp_run_dir("bench-remoting") as d:
                root = Path(d)
                try:
                    if system == "echo":
                        servers = _echo(loadgen, root)
                    elif system == peer:
                        assert rmq is not None
                        servers = rocketmq_pair(rmq, root)
                    else:
                        servers = rocketha_pair(root, system)
                    with servers as at:
                        for n in CONNECTIONS:
                            r = _load(loadgen, at, n, seconds, create_topic=system != "echo")
                            results.setdefault((system, n), []).append(r)
                        if system == "SYNC_MASTER":
                            top = results[(system, 64)][-1]["ok_per_s"]
                            for share in LOAD_SHARES:
                                r = _load(
                                    loadgen, at, 64, seconds, create_topic=False, rate=top * share
                                )
                                results.setdefault((f"{system} paced", share), []).append(r)
                        if system == "SYNC_MASTER" and rmq is not None:
                            java = _java_load(rmq, at, seconds, root / "java")
                            java_p50.append(java["p50_us"])
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    if system != peer:
                        raise
                    # The peer is a comparison, not the figure under test: report it missing.
                    peer_failed = f"{type(e).__name__}: {str(e)[:500]}"
    return _figures(results, rtt_runs, java_p50, rmq.version if rmq else None, peer_failed)


def _figures(
    results: dict[tuple[str, float], list[dict[str, Any]]],
    rtt_runs: list[float],
    java_p50: list[float],
    peer_version: str | None,
    peer_failed: str | None,
) -> list[Figure]:
    def rate(system: str, n: int) -> list[float]:
        return [r["ok_per_s"] for r in results[(system, n)]]

    def lat(system: str, q: str) -> list[float]:
        return [r[f"{q}_us"] for r in results[(system, 1)]]

    def cpu_us(system: str, n: int, process: str) -> list[float]:
        """CPU microseconds of ``process`` (the generator: "loadgen") per answered send."""
        return [
            (r["cpu_s"] if process == "loadgen" else r["watched_cpu_s"][process]) / r["ok"] * 1e6
            for r in results[(system, n)]
        ]

    def conns(n: int) -> str:
        return f"{n} connection{'s' if n > 1 else ''}"

    figs = []
    for n in CONNECTIONS:
        figs.append(
            Figure(
                "remoting",
                f"SYNC_MASTER acked sends/s, {conns(n)}",
                "msgs/s",
                rate("SYNC_MASTER", n),
                "ASYNC_MASTER, same load",
                rate("ASYNC_MASTER", n),
                target=">= 100,000" if n == 64 else None,
            )
        )
    for n in CONNECTIONS:
        figs.append(
            Figure(
                "remoting",
                f"SYNC_MASTER acked sends/s vs the echo ceiling, {conns(n)}",
                "msgs/s",
                rate("SYNC_MASTER", n),
                "echo server, same generator",
                rate("echo", n),
            )
        )
    # Issue 30's targets against the round trip: a SYNC send is two of them at best.
    targets = {"p50": "<= 2.5", "p99": "<= 4", "p999": "<= 10"}
    for q, target in targets.items():
        figs.append(
            Figure(
                "remoting",
                f"SYNC_MASTER send {q}, 1 connection",
                "us",
                lat("SYNC_MASTER", q),
                "loopback round trip",
                rtt_runs,
                higher_is_better=False,
                target=target,
                series={
                    "latency_us": results[("SYNC_MASTER", 1)][-1]["latency_us_percentiles"],
                }
                if q == "p50"
                else {},
            )
        )
    # What the generator, the protocol and the broker's front end cost without the slave's
    # ack; and what the generator and the protocol cost with no broker at all.
    for system in ("ASYNC_MASTER", "echo"):
        figs.append(
            Figure(
                "remoting",
                f"{'echo server' if system == 'echo' else system} send p50, 1 connection",
                "us",
                lat(system, "p50"),
                "loopback round trip",
                rtt_runs,
                higher_is_better=False,
            )
        )
    if java_p50:
        figs.append(
            Figure(
                "remoting",
                "SYNC_MASTER send p50, 1 connection, Java DefaultMQProducer",
                "us",
                java_p50,
                "loopback round trip",
                rtt_runs,
                higher_is_better=False,
            )
        )
    # CPU per acked send at 64 connections, each process against the echo server's per
    # answer: the broker's cost beyond cutting frames and answering.
    for process in ("master", "slave"):
        figs.append(
            Figure(
                "remoting",
                f"SYNC_MASTER {process} CPU per acked send, 64 connections",
                "us",
                cpu_us("SYNC_MASTER", 64, process),
                "echo server CPU per answer",
                cpu_us("echo", 64, "server"),
                higher_is_better=False,
            )
        )
    figs.append(
        Figure(
            "remoting",
            "load generator CPU per acked send, 64 connections, SYNC_MASTER",
            "us",
            cpu_us("SYNC_MASTER", 64, "loadgen"),
            "the same against the echo server",
            cpu_us("echo", 64, "loadgen"),
            higher_is_better=False,
        )
    )
    paced = {share: results[("SYNC_MASTER paced", share)] for share in LOAD_SHARES}
    figs.append(
        Figure(
            "remoting",
            "SYNC_MASTER send p99 at 50% of the maximum acked rate (64 connections, paced)",
            "us",
            [r["p99_us"] for r in paced[0.5]],
            "SYNC_MASTER send p99 at idle (1 connection)",
            lat("SYNC_MASTER", "p99"),
            higher_is_better=False,
            target="<= 2",
            # The curve, from the last run: each share's achieved rate, p50 and p99.
            series={
                "load_share": list(LOAD_SHARES),
                "acked_per_s": [paced[s][-1]["ok_per_s"] for s in LOAD_SHARES],
                "p50_us": [paced[s][-1]["p50_us"] for s in LOAD_SHARES],
                "p99_us": [paced[s][-1]["p99_us"] for s in LOAD_SHARES],
            },
        )
    )
    peer = "RocketMQ SYNC_MASTER"
    runs = len(rtt_runs)
    if peer_version and len(results.get((peer, 64), [])) == runs:
        for n in CONNECTIONS:
            figs.append(
                Figure(
                    "remoting",
                    f"rocketha vs RocketMQ {peer_version} SYNC_MASTER, {conns(n)}",
                    "msgs/s",
                    rate("SYNC_MASTER", n),
                    f"RocketMQ {peer_version} SYNC_MASTER",
                    rate(peer, n),
                )
            )
        figs.append(
            Figure(
                "remoting",
                f"rocketha vs RocketMQ {peer_version} SYNC_MASTER send p50, 1 connection",
                "us",
                lat("SYNC_MASTER", "p50"),
                f"RocketMQ {peer_version} SYNC_MASTER",
                lat(peer, "p50"),
                higher_is_better=False,
            )
        )
        figs.append(
            Figure(
                "remoting",
                f"rocketha vs RocketMQ {peer_version} master CPU per acked send, 64 connections",
                "us",
                cpu_us("SYNC_MASTER", 64, "master"),
                f"RocketMQ {peer_version} master",
                cpu_us(peer, 64, "master"),
                higher_is_better=False,
            )
        )
    elif peer_failed:
        print(f"remoting: RocketMQ {peer_version} left out: {peer_failed}", file=sys.stderr)
    return figs
