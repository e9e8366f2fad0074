"""A healthy producer beside hostile clients (issue 15): its synchronous sends' p50 / p99 while
another process hammers the broker's client port and the name server's port, against the same
producer's figures on the quiet broker in the same run. Target: p99 <= 2x the quiet p99.

The hostile process (``python -m benches.hostile ATTACK BROKER NAMESRV``) holds 1,000 idle
connections and a slow-loris sender open, and loops: random bytes, a 2 GiB length prefix, a
header longer than its frame, JSON that is not an object (each on a new connection, to both
ports), a client that pipelines requests and never reads the answers, and pulls and route
queries for topics that do not exist. It runs in its own process so that its Python never holds
the measuring producer's GIL. The broker is an ASYNC_MASTER in this process, its work in Rust."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rocketha import Broker, BrokerConfig, BrokerRole, Message, NameServer, Producer, _children

from benches.common import Figure, cdf_points, percentile

PULL_MESSAGE, GET_BROKER_RUNTIME_INFO, GET_ROUTEINFO_BY_TOPIC = 11, 28, 105
IDLE_CONNECTIONS = 1000
#: A pull for queue 0 of a topic that does not exist (the topic is set per request).
PULL_FIELDS = {
    "consumerGroup": "g",
    "queueId": "0",
    "queueOffset": "0",
    "maxMsgNums": "32",
    "sysFlag": "0",
    "commitOffset": "0",
    "suspendTimeoutMillis": "0",
    "subVersion": "0",
}
QUANTILES = {"p50": 0.5, "p99": 0.99}


def _request(code: int, ext_fields: dict[str, str], opaque: int) -> bytes:
    header = json.dumps(
        {
            "code": code,
            "extFields": ext_fields,
            "flag": 0,
            "language": "PYTHON",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": 0,
        }
    ).encode()
    return struct.pack(">ii", 4 + len(header), len(header)) + header


#: What no RocketMQ peer sends; each should cost its connection.
GARBAGE = (
    os.urandom(256),
    struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64,
    struct.pack(">iI", 8, 100) + b"\x00" * 4,
    struct.pack(">ii", 13, 9) + b"[1, 2, 3]",
)


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def _glutton(broker: str) -> socket.socket:
    """A client that pipelines requests and never reads: a small receive buffer, so that the
    broker's answers pile up on its side, up to its per-connection output cap."""
    s = _connect(broker)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return s


def _attack(broker: str, namesrv: str) -> None:
    """Prints ``ready`` once the idle connections are open; runs until killed."""
    _idle = [_connect(broker if i % 2 else namesrv) for i in range(IDLE_CONNECTIONS)]
    loris, glutton = _connect(broker), _glutton(broker)
    loris_frame, loris_at = _request(GET_BROKER_RUNTIME_INFO, {}, 0), 0
    print("ready", flush=True)
    opaque = 0
    while True:
        for address in (broker, namesrv):
            for garbage in GARBAGE:
                try:
                    with _connect(address) as s:
                        s.sendall(garbage)
                except OSError:
                    pass  # refused or reset: what a hostile client gets
        with _connect(broker) as s:
            for _ in range(100):
                opaque += 1
                fields = {**PULL_FIELDS, "topic": f"Missing{opaque}"}
                s.sendall(_request(PULL_MESSAGE, fields, opaque))
                s.recv(65536)
        with _connect(namesrv) as s:
            for _ in range(100):
                opaque += 1
                s.sendall(_request(GET_ROUTEINFO_BY_TOPIC, {"topic": f"Missing{opaque}"}, opaque))
                s.recv(65536)
        try:
            glutton.sendall(_request(GET_BROKER_RUNTIME_INFO, {}, opaque) * 100)
        except OSError:
            glutton = _glutton(broker)  # closed at its output cap: another takes its place
        try:
            # One byte of a frame per round: a slow-loris sender.
            loris.send(loris_frame[loris_at : loris_at + 1])
            loris_at = (loris_at + 1) % len(loris_frame)
        except OSError:
            loris, loris_at = _connect(broker), 0


def _latencies(producer: Producer, seconds: float) -> list[float]:
    body = b"x" * 1024
    out = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        producer.send(Message("Healthy", body))
        out.append(time.perf_counter() - started)
    return out


def _with_attack(broker: str, namesrv: str, measure: Callable[[], list[float]]) -> list[float]:
    attacker = _children.spawn(
        [sys.executable, "-m", "benches.hostile", "ATTACK", broker, namesrv],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert attacker.stdout is not None and attacker.stderr is not None
    try:
        # The measured window starts once the idle connections are open.
        if attacker.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the hostile process died: {attacker.stderr.read()[-2000:]}")
        return measure()
    finally:
        _children.kill(attacker)
        attacker.stdout.close()
        attacker.stderr.close()


def run(quick: bool, runs: int) -> list[Figure]:
    seconds = 1.0 if quick else 10.0
    quiet: dict[str, list[float]] = {q: [] for q in QUANTILES}
    loud: dict[str, list[float]] = {q: [] for q in QUANTILES}
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        with _children.temp_run_dir("bench-hostile") as d, NameServer("127.0.0.1:0") as ns:
            broker = Broker(
                BrokerConfig(
                    namesrv_addr=ns.listen_address,
                    broker_role=BrokerRole.ASYNC_MASTER,
                    store_path_root_dir=d,
                    listen_port=0,
                    ha_listen_address="127.0.0.1",
                    ha_listen_port=0,
                )
            ).start()
            try:
                with Producer(ns.listen_address, "bench-healthy") as producer:
                    producer.send(Message("Healthy", b"warm-up"))
                    calm = _latencies(producer, seconds)
                    under = _with_attack(
                        broker.listen_address,
                        ns.listen_address,
                        lambda p=producer: _latencies(p, seconds),  # type: ignore[misc]
                    )
            finally:
                broker.shutdown()
        for q, at in QUANTILES.items():
            quiet[q].append(percentile(calm, at) * 1e6)
            loud[q].append(percentile(under, at) * 1e6)
        samples = (under, calm)
    return [
        Figure(
            "hostile",
            f"healthy sync send {q}, hostile clients on both ports",
            "us",
            loud[q],
            f"the same producer, quiet broker {q}",
            quiet[q],
            higher_is_better=False,
            target="<= 2" if q == "p99" else None,
            series={
                "latency_us": cdf_points(samples[0]),
                "baseline_latency_us": cdf_points(samples[1]),
            }
            if q == "p50"
            else {},
        )
        for q in QUANTILES
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["ATTACK"]:
        _attack(sys.argv[2], sys.argv[3])
