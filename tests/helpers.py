"""Shared helpers of the test suite: brokers in child processes, a raw remoting socket, waiting,
log comparison."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketha import Broker, BrokerConfig, _children
from rocketha.store import segment_checksums

SEGMENT = 64 * 1024
#: A RocketMQ 5 client's ``MQVersion`` ordinal: it gets routes as standard JSON.
ROUTE_V5 = 479


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Polls ``predicate`` until truthy; a generous timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def write_conf(path: Path, **keys: Any) -> Path:
    lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


class BrokerProcess:
    """``rocketha broker -c CONF`` in a child process; its log goes to ``CONF.log`` (a file, not
    a pipe: an undrained pipe would block a chatty broker). ``prefix``: a command that execs
    the broker (``ip netns exec NAME``: the broker in a network namespace)."""

    def __init__(self, conf: Path, *extra: str, prefix: Sequence[str] = ()) -> None:
        self.conf = conf
        self.log = conf.with_suffix(".log")
        command = [sys.executable, "-m", "rocketha", "-v", "broker", "-c", str(conf), *extra]
        with self.log.open("a") as log:
            self.proc = _children.spawn(
                [*prefix, *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise AssertionError(f"broker failed to start: {self.stderr()}")
        self.started = json.loads(line)["started"]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._close()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit()

    def wait_exit(self) -> int:
        """The exit status of a broker already told to stop, without signalling it again (a
        second SIGTERM that lands as the interpreter finalizes meets the default handler)."""
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"broker ignored SIGTERM for 30 s; its threads:\n{threads_state(self.proc.pid)}"
                f"its log:\n{self.stderr()}"
            ) from None
        finally:
            self._close()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    def stderr(self) -> str:
        return self.log.read_text()


def threads_state(pid: int) -> str:
    """Each thread of ``pid``: its state and signal masks (blocked, pending, shared pending),
    what a process that ignores a signal has to be asked."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda t: int(t.name)):
        with contextlib.suppress(OSError):
            status = dict(
                line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
            )
            wchan = (task / "wchan").read_text()
            fields = ("Name", "State", "SigBlk", "SigPnd", "ShdPnd")
            lines.append(" ".join([task.name, *(status[f].strip() for f in fields), wchan]))
    return "\n".join(lines) + "\n"


def start_slave(tmp: Path, name: str, master_address: str | None, **keys: Any) -> BrokerProcess:
    """A SLAVE stored under ``tmp / name``; with no ``master_address`` it replicates from the
    master the name server (``namesrvAddr`` among ``keys``) answers."""
    if master_address is not None:
        keys["haMasterAddress"] = master_address
    conf = write_conf(
        tmp / f"{name}.properties",
        brokerName=keys.pop("brokerName", "broker-a"),
        brokerId=keys.pop("brokerId", 1),
        brokerRole="SLAVE",
        storePathRootDir=tmp / name,
        mappedFileSizeCommitLog=keys.pop("mappedFileSizeCommitLog", SEGMENT),
        listenPort=keys.pop("listenPort", 0),
        **keys,
    )
    return BrokerProcess(conf)


def remoting_request(
    code: int, ext_fields: dict[str, str], opaque: int, body: bytes = b"", version: int = ROUTE_V5
) -> bytes:
    """One RocketMQ remoting request frame with a JSON header."""
    header = json.dumps(
        {
            "code": code,
            "extFields": ext_fields,
            "flag": 0,
            "language": "PYTHON",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": version,
        }
    ).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


class RemotingSocket:
    """A minimal blocking RocketMQ remoting client: JSON header, one request at a time."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.opaque = 0

    def invoke(
        self, code: int, ext_fields: dict[str, str], body: bytes = b"", version: int = ROUTE_V5
    ) -> tuple[dict[str, Any], bytes]:
        self.opaque += 1
        self.sock.sendall(remoting_request(code, ext_fields, self.opaque, body, version))
        response, body = self.read_response()
        assert response["opaque"] == self.opaque and response["flag"] & 1
        return response, body

    def read_response(self) -> tuple[dict[str, Any], bytes]:
        """The next frame: its JSON header and its body."""
        total, word = struct.unpack(">ii", self._read(8))
        rest = self._read(total - 4)
        header_len = word & 0xFFFFFF
        return json.loads(rest[:header_len]), rest[header_len:]

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the peer closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def broker_fields(broker_id: int, addr: str, ha: str, body: bytes) -> dict[str, str]:
    return {
        "brokerName": "broker-a",
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": ha,
        "brokerId": str(broker_id),
        "enableActingMaster": "false",
        "compressed": "false",
        # UtilAll.crc32: the unsigned CRC32 masked to 31 bits.
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }


#: The checksum of a segment with no bytes used yet.
EMPTY_SEGMENT = hashlib.sha256().hexdigest()


def same_log(a: Path, b: Path) -> bool:
    """Byte-identical logs. A segment with nothing written is no difference: a master killed just
    after rolling to a new segment recovers with that empty file, which its slave never had."""

    def used(store: Path) -> dict[str, str]:
        return {k: v for k, v in segment_checksums(store).items() if v != EMPTY_SEGMENT}

    return used(a) == used(b)


__all__ = [
    "ROUTE_V5",
    "SEGMENT",
    "BrokerProcess",
    "RemotingSocket",
    "broker_fields",
    "remoting_request",
    "same_log",
    "start_slave",
    "wait_for",
    "write_conf",
]


GET_BROKER_RUNTIME_INFO = 28
GET_ALL_CONSUMER_OFFSET = 43
GET_ROUTEINFO_BY_TOPIC = 105


def ask_json(address: str, code: int) -> dict[str, Any]:
    """Request ``code`` (no fields) on a connection of its own; the JSON body of its
    SUCCESS answer."""
    sock = RemotingSocket(address)
    try:
        response, body = sock.invoke(code, {})
    finally:
        sock.close()
    assert response["code"] == 0, response
    return dict(json.loads(body))


def runtime_info(address: str) -> dict[str, str]:
    """A broker's GET_BROKER_RUNTIME_INFO table."""
    return dict(ask_json(address, GET_BROKER_RUNTIME_INFO)["table"])


def served(address: str) -> int:
    """Messages the broker returned to pulls since it started (``msgGetTotalTodayNow``)."""
    return int(runtime_info(address)["msgGetTotalTodayNow"])


UPDATE_AND_CREATE_TOPIC = 17


def create_topic(address: str, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC, as ``mqadmin updateTopic -b`` does on each master: a topic
    auto-created by a send lives only on the broker that took that send."""
    sock = RemotingSocket(address)
    try:
        created = {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
        }
        response, _ = sock.invoke(UPDATE_AND_CREATE_TOPIC, created)
    finally:
        sock.close()
    assert response["code"] == 0, response


@dataclass
class RochaNamesrv:
    """A ``rocketha namesrv`` process."""

    proc: subprocess.Popen[str]
    address: str
    log: Path


@contextlib.contextmanager
def spawn_rocketha_namesrv(log: Path, *extra: str) -> Iterator[RochaNamesrv]:
    """``rocketha namesrv`` on an OS-chosen port with ``extra`` arguments, killed at the end;
    its log goes to ``log`` (an undrained pipe would block it)."""
    with log.open("w") as stderr:
        proc = _children.spawn(
            [sys.executable, "-m", "rocketha", "-v", "namesrv", "--listen", "127.0.0.1:0", *extra],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"namesrv failed to start: {log.read_text()}"
        yield RochaNamesrv(proc, json.loads(line)["started"]["listen"], log)
    finally:
        _children.kill(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def start_master(root: Path, name: str, namesrv: str, **keys: object) -> BrokerProcess:
    """A rocketha SYNC_MASTER process registering with ``namesrv``; ``keys`` override."""
    settings: dict[str, object] = {
        "brokerName": name,
        "brokerRole": "SYNC_MASTER",
        "storePathRootDir": root / f"{name}-master",
        "mappedFileSizeCommitLog": SEGMENT,
        "haListenAddress": "127.0.0.1",
        "haListenPort": 0,
        "listenPort": 0,
        "namesrvAddr": namesrv,
        "slaveTimeout": 10000,
        **keys,
    }
    return BrokerProcess(write_conf(root / f"{name}-master.conf", **settings))


@dataclass
class Certificates:
    """PEM files made by :func:`make_certificates`."""

    ca: Path
    #: Signed by ``ca`` for 127.0.0.1 and localhost.
    cert: Path
    key: Path


def make_certificates(directory: Path, name: str = "server") -> Certificates:
    """A fresh CA and a server certificate it signed, with the openssl command line (EC P-256
    keys, PKCS#8, valid for a day)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / f"{name}-ca.key", directory / f"{name}-ca.pem"
    key, csr, cert = (directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for args in (
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "1", "-subj", "/CN=ca"],
        ["req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        [
            *("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial"),
            *("-out", cert, "-days", "1", "-extfile", ext),
        ],
    ):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    return Certificates(ca=ca, cert=cert, key=key)


def offsets(address: str, key: str) -> dict[str, int] | None:
    """The broker's committed offsets of ``topic@group`` (GET_ALL_CONSUMER_OFFSET)."""
    sock = RemotingSocket(address)
    try:
        response, body = sock.invoke(GET_ALL_CONSUMER_OFFSET, {})
    finally:
        sock.close()
    assert response["code"] == 0, response
    table = json.loads(body)["offsetTable"].get(key)
    return None if table is None else {str(k): int(v) for k, v in table.items()}


def routed(namesrv: str, topic: str) -> bool:
    """The name server answers a route for ``topic``."""
    return topic_brokers(namesrv, topic) > 0


def topic_brokers(namesrv: str, topic: str) -> int:
    """Broker groups in ``topic``'s route on the name server."""
    sock = RemotingSocket(namesrv)
    try:
        response, body = sock.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    finally:
        sock.close()
    return len(json.loads(body)["queueDatas"]) if response["code"] == 0 else 0


@contextlib.contextmanager
def broker_pair(
    root: Path, name: str, namesrv: str, **slave_keys: Any
) -> Iterator[tuple[Broker, Broker]]:
    """Broker group ``name`` in this process: a SYNC_MASTER and its SLAVE, which serves pulls
    (``slaveReadEnable``) and learns new topics within 100 ms (``slaveSyncInterval``), with
    ``slave_keys`` besides."""
    common: dict[str, Any] = dict(
        broker_name=name,
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        namesrv_addr=namesrv,
    )
    master_conf = BrokerConfig(
        broker_role="SYNC_MASTER",
        store_path_root_dir=str(root / f"{name}-master"),
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        # Retention of every segment but the last, when a test calls clean_now().
        mapped_file_size_consume_queue=50 * 20,
        delete_when=";".join(str(h) for h in range(24)),
        file_reserved_time=1,
        file_reserved_time_unit_ms=1,
        clean_resource_interval=3_600_000,
        **common,
    )
    with Broker(master_conf) as master:
        slave_conf = BrokerConfig(
            broker_role="SLAVE",
            broker_id=1,
            store_path_root_dir=str(root / f"{name}-slave"),
            ha_master_address=master.ha_address,
            slave_read_enable=True,
            slave_sync_interval=100,
            **common,
            **slave_keys,
        )
        with Broker(slave_conf) as slave:
            assert master.ha is not None
            assert master.ha.wait_for_state(None, "TRANSFER", timeout=60)
            yield master, slave


def default_ports_namespace(*argv: str) -> list[str]:
    """``argv`` run in network and PID namespaces of its own, with loopback up: RocketMQ's
    default ports are free there (the suite holds them on the host, ``default_ports.py``) and
    nothing it binds reaches the host. Started with :func:`rocketha._children.spawn`, the whole
    namespace dies with the test: ``unshare`` dies with its parent, and its child, PID 1 of the
    namespace, with it (``--kill-child``), which takes every process in it along, background
    jobs and orphans included. ``/proc`` is the namespace's own (PySpark's daemon finds its
    workers by the pids it sees)."""
    return [
        *("unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--"),
        *("sh", "-c", 'ip link set lo up && exec "$0" "$@"', *argv),
    ]


def namespace_refusal() -> str | None:
    """Why :func:`default_ports_namespace` cannot run here, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare(1) and ip(8) to make a network namespace"
    probe = subprocess.run(default_ports_namespace("true"), capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make network and PID namespaces (unshare): {probe.stderr.strip()}"
    return None
