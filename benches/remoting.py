"""Acknowledged sends/s over the network (issue 12), 1 KiB messages: ``rocketha namesrv`` and a
SYNC_MASTER + SLAVE ``rocketha broker`` pair as processes, loaded by a Java load generator
(``benches/peers/java/Load.java``: RocketMQ's own ``DefaultMQProducer``, one client instance,
so one connection, per sending thread, each sending synchronously) over 1, 8 and 64
connections. Targets: >= 100,000 acked sends/s at 64 connections; p50 <= 3x the loopback round
trip at 1 connection.

Baselines, all from the same run: the acked rates against an ASYNC_MASTER + SLAVE pair of
rocketha brokers driven by the same load generator over the same protocol (the ratio is the
price of waiting for the slave); latencies at 1 connection against the raw loopback round trip
(``tcp_ping_pong``); and, when Java and Maven can resolve it, the same load against Apache
RocketMQ 5.4.0 SYNC_MASTER + SLAVE (ratio rocketha / RocketMQ; above 1 means rocketha is
ahead)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benches.common import Figure, Skipped, native_baselines, percentile
from benches.peers import rocketmq

CONNECTIONS = (1, 8, 64)
TOPIC = "BenchRemoting"
#: One commit log segment holds a whole run: no segment roll inside a measurement.
SEGMENT = 1 << 30
GET_BROKER_RUNTIME_INFO = 28


class _Process:
    """``python -m rocketha ARGS`` whose first stdout line is ``{"started": {...}}``; stderr
    goes to ``log`` (a file: an undrained pipe would block the process)."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        with log.open("a") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rocketha", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            raise RuntimeError(f"rocketha {' '.join(args)} did not start: {log.read_text()}")
        self.started: dict[str, Any] = json.loads(line)["started"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _runtime_info(address: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO over one remoting request (JSON header)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        header = json.dumps(
            {
                "code": GET_BROKER_RUNTIME_INFO,
                "extFields": {},
                "flag": 0,
                "language": "PYTHON",
                "opaque": 1,
                "serializeTypeCurrentRPC": "JSON",
                "version": 479,
            }
        ).encode()
        sock.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError(f"{address} closed the connection")
            data += chunk
        header_len = struct.unpack(">i", data[4:8])[0] & 0xFFFFFF
        table: dict[str, str] = json.loads(data[8 + header_len :])["table"]
        return table


@contextlib.contextmanager
def _rocketha_pair(root: Path, role: str) -> Iterator[tuple[str, str]]:
    """``rocketha namesrv``, a ``role`` master and a SLAVE that finds its master through the
    name server, as processes; yields the name server's and the master's addresses once the
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
        addresses = {}
        for name, keys in confs.items():
            conf = root / f"{name}.properties"
            conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
            broker = _Process(root / f"{name}.log", "broker", "-c", str(conf))
            procs.append(broker)
            addresses[name] = broker.started["listen_address"]
        deadline = time.monotonic() + 60
        while not _runtime_info(addresses["master"]).get("slaveAckOffsets"):
            if time.monotonic() > deadline:
                raise RuntimeError("the slave did not connect to the master in 60 s")
            time.sleep(0.05)
        yield namesrv, addresses["master"]
    finally:
        for p in reversed(procs):
            p.stop()


@contextlib.contextmanager
def _rocketmq_pair(
    rmq: rocketmq.RocketMQ,
    root: Path,
    role: str = "SYNC_MASTER",
    jvm: Sequence[str] = rocketmq.JVM_FLAGS,
    **tuning: Any,
) -> Iterator[tuple[str, str]]:
    """Apache RocketMQ name server, ``role`` master and SLAVE; the brokers on ``jvm`` flags
    (default: the harness's small JVM) with ``tuning`` (broker.conf keys)."""
    # inSyncReplicas=2: without it a 5.x SYNC_MASTER answers SEND_OK without its slave's ack.
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
        ),
    ):
        yield ns.address, master.address


def _load(
    rmq: rocketmq.RocketMQ, at: tuple[str, str], connections: int, seconds: float, home: Path
) -> dict[str, Any]:
    namesrv, broker = at
    r: dict[str, Any] = rmq.load(
        namesrv, TOPIC, connections, seconds, 1024, home=home, broker=broker
    )
    if r["ok"] != r["sent"] or not r["sent"]:
        raise RuntimeError(f"{connections} connections: not every send acked: {r['statuses']}")
    return r


def run(quick: bool, runs: int) -> list[Figure]:
    why = rocketmq.missing_tools()
    if why:
        raise Skipped(f"the load generator is Java: {why}")
    try:
        rmq = rocketmq.RocketMQ.resolve(rocketmq.VERSION_5)
    except rocketmq.Unavailable as e:
        raise Skipped(f"the load generator needs the RocketMQ client: {e}") from None
    baseline = native_baselines()
    seconds = 3.0 if quick else 10.0
    systems = ("SYNC_MASTER", "ASYNC_MASTER", "RocketMQ SYNC_MASTER")
    rates: dict[tuple[str, int], list[float]] = {}
    lat: dict[tuple[str, str], list[float]] = {}
    rtt_runs: list[float] = []
    peer_failed: str | None = None
    for _ in range(runs):
        rtt_runs.append(percentile(baseline.tcp_ping_pong(5000), 0.5) * 1e6)
        for system in systems:
            if system.startswith("RocketMQ") and peer_failed:
                continue
            with tempfile.TemporaryDirectory() as d:
                root = Path(d)
                try:
                    pair = (
                        _rocketmq_pair(rmq, root)
                        if system.startswith("RocketMQ")
                        else _rocketha_pair(root, system)
                    )
                    with pair as at:
                        for n in CONNECTIONS:
                            r = _load(rmq, at, n, seconds, root / f"load-{n}")
                            rates.setdefault((system, n), []).append(r["ok"] / r["seconds"])
                            if n == 1:
                                for q in ("p50", "p99"):
                                    lat.setdefault((system, q), []).append(r[f"{q}_us"])
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    if not system.startswith("RocketMQ"):
                        raise
                    # The peer is a comparison, not the figure under test: report it missing.
                    peer_failed = f"{type(e).__name__}: {str(e)[:500]}"
    figs = []
    for n in CONNECTIONS:
        figs.append(
            Figure(
                "remoting",
                f"SYNC_MASTER acked sends/s, {n} connection{'s' if n > 1 else ''}",
                "msgs/s",
                rates[("SYNC_MASTER", n)],
                "ASYNC_MASTER, same load",
                rates[("ASYNC_MASTER", n)],
                target=">= 100,000" if n == 64 else None,
            )
        )
    for q in ("p50", "p99"):
        figs.append(
            Figure(
                "remoting",
                f"SYNC_MASTER send {q}, 1 connection",
                "us",
                lat[("SYNC_MASTER", q)],
                "loopback round trip",
                rtt_runs,
                higher_is_better=False,
                target="<= 3" if q == "p50" else None,
            )
        )
    # What the client, the protocol and the broker's front end cost without the slave's ack.
    figs.append(
        Figure(
            "remoting",
            "ASYNC_MASTER send p50, 1 connection",
            "us",
            lat[("ASYNC_MASTER", "p50")],
            "loopback round trip",
            rtt_runs,
            higher_is_better=False,
        )
    )
    peer = "RocketMQ SYNC_MASTER"
    if (peer, 64) in rates and len(rates[(peer, 64)]) == runs:
        for n in CONNECTIONS:
            figs.append(
                Figure(
                    "remoting",
                    f"rocketha vs RocketMQ {rmq.version} SYNC_MASTER, {n} connection"
                    + ("s" if n > 1 else ""),
                    "msgs/s",
                    rates[("SYNC_MASTER", n)],
                    f"RocketMQ {rmq.version} SYNC_MASTER",
                    rates[(peer, n)],
                )
            )
        figs.append(
            Figure(
                "remoting",
                f"rocketha vs RocketMQ {rmq.version} SYNC_MASTER send p50, 1 connection",
                "us",
                lat[("SYNC_MASTER", "p50")],
                f"RocketMQ {rmq.version} SYNC_MASTER",
                lat[(peer, "p50")],
                higher_is_better=False,
            )
        )
    elif peer_failed:
        print(f"remoting: RocketMQ {rmq.version} left out: {peer_failed}", file=sys.stderr)
    return figs
