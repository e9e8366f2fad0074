"""The same replicated-append workload on Redis: a master and a replica on 127.0.0.1.

Per message, ``XADD`` then ``WAIT 1 0`` (returns once the replica has it) against our
SYNC_MASTER ``put``; batched, a pipeline of ``BATCH`` XADDs and one WAIT against ``put_batch``
of ``BATCH`` messages. One producer thread drives both the same way and times every call. Both
sides keep the log in memory and write nothing to disk per put (Redis without AOF or RDB, ours
with ASYNC_FLUSH), so the comparison is replication, not fsync.

The harness installs nothing: set ``ROCKETHA_REDIS_SERVER`` to a ``redis-server`` binary or
have one on PATH (Debian: ``apt-get install redis-server``); otherwise the scenario is skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from rocketha import Broker, Message, PutStatus, _children

from benches.common import Figure, Skipped, broker_pair, cdf_points, percentile

BODY = b"r" * 1024
BATCH = 100
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
#: What a RESP reply can be; errors raise.
Reply = bytes | int | list["Reply"] | None


class Resp:
    """A minimal RESP2 client: enough to pipeline commands and read their replies."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def send(self, *commands: tuple[bytes | str | int, ...]) -> None:
        """Writes every command in one ``sendall`` (a pipeline)."""
        out = bytearray()
        for command in commands:
            out += b"*%d\r\n" % len(command)
            for arg in command:
                raw = arg if isinstance(arg, bytes) else str(arg).encode()
                out += b"$%d\r\n%s\r\n" % (len(raw), raw)
        self.sock.sendall(out)

    def reply(self) -> Reply:
        line = self.reader.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(f"redis: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self.reader.read(size + 2)[:-2]
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self.reply() for _ in range(size)]
        raise RuntimeError(f"redis: unexpected reply {line!r}")

    def call(self, *command: bytes | str | int) -> Reply:
        self.send(command)
        return self.reply()


def redis_server() -> str:
    """The ``redis-server`` to run, or :class:`Skipped` saying how to get one."""
    configured = os.environ.get("ROCKETHA_REDIS_SERVER")
    found = configured or shutil.which("redis-server")
    if found is None or not os.access(found, os.X_OK):
        where = f"ROCKETHA_REDIS_SERVER={configured}" if configured else "redis-server on PATH"
        raise Skipped(
            f"no {where}: install it (Debian: apt-get install redis-server) or set "
            "ROCKETHA_REDIS_SERVER to a redis-server binary"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect(port: int, server: subprocess.Popen[bytes], log: Path) -> Resp:
    deadline = time.monotonic() + 15
    while True:
        try:
            return Resp(port)
        except ConnectionRefusedError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server on port {port} did not start: {log.read_text()[-2000:]}"
                ) from None
            time.sleep(0.05)


@contextlib.contextmanager
def redis_pair(binary: str, root: Path) -> Iterator[Resp]:
    """A Redis master with one connected replica; yields a client of the master."""
    servers: list[subprocess.Popen[bytes]] = []
    clients: list[Resp] = []
    try:
        ports = [_free_port(), _free_port()]
        for i, port in enumerate(ports):
            d = root / f"redis{i}"
            d.mkdir()
            args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d)]
            args += ["--save", "", "--appendonly", "no", "--logfile", str(d / "log")]
            if i:
                args += ["--replicaof", "127.0.0.1", str(ports[0])]
            servers.append(_children.spawn(args, stdout=subprocess.DEVNULL))
            clients.append(_connect(port, servers[-1], d / "log"))
        deadline = time.monotonic() + 15
        while True:
            info = clients[1].call("INFO", "replication")
            if isinstance(info, bytes) and b"master_link_status:up" in info:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis replica did not connect to its master")
            time.sleep(0.05)
        yield clients[0]
    finally:
        for client in clients:
            client.close()
        for server in servers:
            _children.stop(server, 10)


def _redis_puts(r: Resp, n: int) -> list[float]:
    latencies = []
    for _ in range(n):
        t = time.perf_counter()
        r.send(("XADD", "BenchTopic", "*", "body", BODY), ("WAIT", 1, 0))
        r.reply()
        if r.reply() != 1:
            raise RuntimeError("redis WAIT: the replica did not acknowledge")
        latencies.append(time.perf_counter() - t)
    return latencies


def _redis_batches(r: Resp, batches: int) -> float:
    xadd = ("XADD", "BenchTopic", "*", "body", BODY)
    started = time.perf_counter()
    for _ in range(batches):
        r.send(*[xadd] * BATCH, ("WAIT", 1, 0))
        for _ in range(BATCH):
            r.reply()
        if r.reply() != 1:
            raise RuntimeError("redis WAIT: the replica did not acknowledge")
    return batches * BATCH / (time.perf_counter() - started)


def _our_puts(master: Broker, n: int) -> list[float]:
    msg = Message("BenchTopic", BODY)
    latencies = []
    for _ in range(n):
        t = time.perf_counter()
        status = master.put(msg).status
        if status is not PutStatus.PUT_OK:
            raise RuntimeError(f"put not acked: {status}")
        latencies.append(time.perf_counter() - t)
    return latencies


def _our_batches(master: Broker, batches: int) -> float:
    msgs = [Message("BenchTopic", BODY)] * BATCH
    started = time.perf_counter()
    for _ in range(batches):
        status = master.put_batch(msgs)[-1].status
        if status is not PutStatus.PUT_OK:
            raise RuntimeError(f"put_batch not acked: {status}")
    return batches * BATCH / (time.perf_counter() - started)


def run(quick: bool, runs: int) -> list[Figure]:
    binary = redis_server()
    n = 2000 if quick else 20_000
    batches = 20 if quick else 200
    ours: dict[str, list[float]] = {}
    theirs: dict[str, list[float]] = {}
    with _children.temp_run_dir("bench-peer-redis") as d, redis_pair(binary, Path(d)) as redis:
        master, slave = broker_pair(Path(d), "SYNC_MASTER")
        try:
            for _ in range(runs):
                lat_ours, lat_redis = _our_puts(master, n), _redis_puts(redis, n)
                for q, v in QUANTILES.items():
                    ours.setdefault(q, []).append(percentile(lat_ours, v) * 1e6)
                    theirs.setdefault(q, []).append(percentile(lat_redis, v) * 1e6)
                ours.setdefault("1p", []).append(n / sum(lat_ours))
                theirs.setdefault("1p", []).append(n / sum(lat_redis))
                ours.setdefault("batch", []).append(_our_batches(master, batches))
                theirs.setdefault("batch", []).append(_redis_batches(redis, batches))
        finally:
            slave.shutdown()
            master.shutdown()
    base = "Redis XADD + WAIT 1 0"
    figs = [
        Figure(
            "peer-redis",
            f"replicated put {q}, 1 producer",
            "us",
            ours[q],
            base,
            theirs[q],
            higher_is_better=False,
            series={
                "latency_us": cdf_points(lat_ours),
                "baseline_latency_us": cdf_points(lat_redis),
            }
            if q == "p50"
            else {},
        )
        for q in QUANTILES
    ]
    figs.append(
        Figure("peer-redis", "acked puts/s, 1 producer", "msgs/s", ours["1p"], base, theirs["1p"])
    )
    figs.append(
        Figure(
            "peer-redis",
            f"acked msgs/s, batches of {BATCH}",
            "msgs/s",
            ours["batch"],
            f"Redis pipeline of {BATCH} XADD + WAIT",
            theirs["batch"],
        )
    )
    return figs
