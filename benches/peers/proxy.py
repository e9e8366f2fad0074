"""Apache RocketMQ 5's proxy (``ProxyStartup``, cluster mode) as a peer, and the 5.x gRPC Java
client (``rocketmq-client-java``) that talks to it.

The proxy speaks ``apache.rocketmq.v2`` (gRPC) to clients and remoting to the name server and
brokers behind it: in cluster mode it holds no messages of its own, so a rocketha name server
and broker behind it see what RocketMQ's proxy asks a broker. It shares the RocketMQ harness's
machinery (``rocketmq.py``): the pinned jars (``java/proxy/pom.xml``, ``rocketmq-proxy``) and
the client's (``java5/pom.xml``) are resolved once with Maven and their classpaths cached
under ``~/.cache/rocketha/rocketmq-proxy/<version>/`` and ``.../rocketmq-client-java/<version>/``,
beside the compiled ``java5/Grpc5.java``.

>>> proxy = ApacheProxy.resolve()
>>> with proxy.start(tmp / "proxy", ns.address, "InteropCluster") as p:
...     grpc = GrpcClient.resolve()
...     sent = grpc.send(p.endpoint, "T", 1, delay_ms=3000, home=tmp / "g")

The proxy runs on 127.0.0.1 with its gRPC and remoting ports picked free at start, its
``rmq-proxy.json`` and logs (``logs/rocketmqlogs/proxy.log``) in its home, a 256 MiB heap, and
is stopped (SIGTERM, then SIGKILL) when its ``with`` block ends or its start fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketha import _children

from benches.peers.rocketmq import (
    CACHE,
    CLIENT_JVM,
    JAVA_DIR,
    JVM_FLAGS,
    VERSION_5,
    JavaProcess,
    PeerProcess,
    Unavailable,
    compile_java,
    free_ports,
    maven_classpath,
    missing_tools,
    port_open,
    retry_ports,
)

PROXY_JAVA = JAVA_DIR / "proxy"
JAVA5 = JAVA_DIR.with_name("java5")
#: The gRPC client the tests and benches run: the 5.0 line's last release on Maven Central.
CLIENT_VERSION = "5.0.7"
#: What ProxyStartup prints on stdout once its gRPC and remoting servers serve.
STARTED = "rocketmq-proxy startup successfully"


class Proxy(JavaProcess):
    """``ProxyStartup -pc rmq-proxy.json`` in cluster mode in front of ``namesrv``; ``conf``
    keys are ProxyConfig's (its JSON file's), over the harness's ports and addresses."""

    kind = "proxy"

    def __init__(
        self,
        classpath: str,
        home: Path,
        namesrv: str,
        cluster: str,
        jvm: Sequence[str] = JVM_FLAGS,
        **conf: Any,
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        base = free_ports(2)
        self.grpc_port = base
        self.remoting_port = base + 1
        keys: dict[str, Any] = {
            "rocketMQClusterName": cluster,
            "namesrvAddr": namesrv,
            "proxyMode": "cluster",
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.remoting_port,
            # The address the proxy hands clients in routes (its own, in cluster mode): by
            # default the first non-loopback address, which a loopback test cannot count on.
            "localServeAddr": "127.0.0.1",
            **conf,
        }
        self.conf = keys
        config = home / "rmq-proxy.json"
        config.write_text(json.dumps(keys, indent=2))
        main = "org.apache.rocketmq.proxy.ProxyStartup"
        super().__init__(classpath, home, main, ["-pc", str(config)], jvm)
        try:
            self.wait_ready(self.grpc_port, STARTED)
            if not port_open(self.remoting_port):
                raise RuntimeError(f"proxy printed {STARTED!r} but {self.remoting_port} is shut")
        except BaseException:
            self.kill()
            raise

    @property
    def endpoint(self) -> str:
        """The gRPC endpoint, as a 5.x client's ``setEndpoints`` takes it."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def remoting_address(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"


class ApacheProxy:
    """The pinned RocketMQ proxy, resolved and ready to start."""

    _resolved: dict[str, ApacheProxy] = {}  # a process-wide cache

    def __init__(self, version: str, classpath: str) -> None:
        self.version = version
        self.classpath = classpath

    @classmethod
    def resolve(cls, version: str = VERSION_5) -> ApacheProxy:
        """Resolves ``rocketmq-proxy`` ``version`` (Maven, once per machine)."""
        if version not in cls._resolved:
            why = missing_tools()
            if why:
                raise Unavailable(why)
            cache = CACHE.with_name("rocketmq-proxy") / version
            cp = maven_classpath(PROXY_JAVA / "pom.xml", {"rocketmq.version": version}, cache)
            cls._resolved[version] = cls(version, cp)
        return cls._resolved[version]

    def start(
        self,
        home: Path,
        namesrv: str,
        cluster: str,
        *,
        jvm: Sequence[str] = JVM_FLAGS,
        **conf: Any,
    ) -> Proxy:
        """A started proxy in front of the name server at ``namesrv``, serving the brokers of
        ``cluster`` (its ``rocketMQClusterName``), with ProxyConfig's ``conf`` keys."""
        return retry_ports(lambda: Proxy(self.classpath, home, namesrv, cluster, jvm, **conf))


@dataclass(frozen=True)
class GrpcSent:
    """One send of ``Grpc5 send``: a receipt (``message_id``), or the client's exception
    (``error``: its class and message)."""

    seq: int
    message_id: str = ""
    #: Epoch ms the message was to be delivered at; None for a plain send.
    delivery_ms: int | None = None
    recall_handle: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class GrpcReceived:
    """One delivery ``Grpc5 receive`` got."""

    message_id: str
    #: The delivery timestamp the message carries (its TIMER_DELIVER_MS); None for none.
    delivery_ms: int | None
    #: Epoch ms the receive returned it.
    received_ms: int
    #: 1 for its first delivery, 2 for the next (its reconsume count + 1).
    attempt: int
    body: str


def _sent(lines: Sequence[str]) -> list[GrpcSent]:
    out = []
    for line in lines:
        f = line.split(" ")
        if f[0] == "SENT":
            at = None if f[3] == "-" else int(f[3])
            out.append(GrpcSent(int(f[1]), f[2], at, None if f[4] == "-" else f[4]))
        elif f[0] == "FAILED":
            out.append(GrpcSent(int(f[1]), error=" ".join(f[2:])))
    return out


class GrpcReceiver(PeerProcess):
    """A running ``Grpc5 receive``: it ends by itself at its count or its timeout."""

    def __init__(self, command: list[str], home: Path) -> None:
        super().__init__(command, home, "grpc-receive")

    @property
    def received(self) -> list[GrpcReceived]:
        out = []
        for line in list(self.lines):
            if line.startswith("GOT "):
                _, mid, at, ms, attempt, body = line.split(" ", 5)
                out.append(
                    GrpcReceived(mid, None if at == "-" else int(at), int(ms), int(attempt), body)
                )
        return out

    def finish(self, timeout: float) -> list[GrpcReceived]:
        """Waits for it to end (at its count or timeout): what it received."""
        self.stop(timeout)
        return self.received

    def __enter__(self) -> GrpcReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        _children.kill(self.proc)


class GrpcClient:
    """``java5/Grpc5.java`` compiled against the pinned ``rocketmq-client-java``."""

    _resolved: dict[str, GrpcClient] = {}  # a process-wide cache

    def __init__(self, version: str, classpath: str, classes: Path) -> None:
        self.version = version
        self.classpath = classpath
        self.classes = classes

    @classmethod
    def resolve(cls, version: str = CLIENT_VERSION) -> GrpcClient:
        """Resolves (Maven, once per machine) and compiles (once per source) the client."""
        if version not in cls._resolved:
            why = missing_tools()
            if why:
                raise Unavailable(why)
            cache = CACHE.with_name("rocketmq-client-java") / version
            cp = maven_classpath(JAVA5 / "pom.xml", {"client.version": version}, cache)
            classes = compile_java(sorted(JAVA5.glob("*.java")), cp, cache)
            cls._resolved[version] = cls(version, cp, classes)
        return cls._resolved[version]

    def command(self, home: Path, args: Sequence[str]) -> list[str]:
        """``Grpc5 ARGS`` on the harness's client JVM; the client logs under ``home``."""
        home.mkdir(parents=True, exist_ok=True)
        return [
            *CLIENT_JVM,
            f"-Duser.home={home}",
            "-Drocketmq.log.level=warn",
            "-cp",
            f"{self.classes}{os.pathsep}{self.classpath}",
            "Grpc5",
            *args,
        ]

    def send(
        self,
        endpoint: str,
        topic: str,
        count: int,
        *,
        home: Path,
        delay_ms: int | None = None,
        message_group: str | None = None,
        timeout: float = 120.0,
    ) -> list[GrpcSent]:
        """``count`` sends to ``topic`` through the proxy at ``endpoint``, one after the other,
        each with ``setDeliveryTimestamp(now + delay_ms)`` unless ``delay_ms`` is None, and of
        FIFO group ``message_group`` if given: each one's receipt or failure."""
        args = ["send", endpoint, topic, str(count)]
        if delay_ms is not None or message_group is not None:
            args.append("-" if delay_ms is None else str(delay_ms))
        if message_group is not None:
            args.append(message_group)
        proc = _children.run(
            self.command(home, args), cwd=home, capture_output=True, text=True, timeout=timeout
        )
        (home / "grpc-send.out").write_text(proc.stdout + proc.stderr)
        lines = proc.stdout.splitlines()
        if proc.returncode != 0 or not any(line.startswith("DONE ") for line in lines):
            raise RuntimeError(
                f"Grpc5 {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}"
            )
        return _sent(lines)

    def receiver(
        self,
        endpoint: str,
        topic: str,
        group: str,
        count: int,
        timeout_s: int,
        *,
        home: Path,
        unacked_first: bool = False,
    ) -> GrpcReceiver:
        """A ``SimpleConsumer`` of ``group`` on ``topic`` receiving (and acking) until ``count``
        messages were acked or ``timeout_s``, in the background; with ``unacked_first`` each
        message's first delivery is left unacked, to come back after its invisible time."""
        args = ["receive", endpoint, topic, group, str(count), str(timeout_s)]
        if unacked_first:
            args.append("unacked-first")
        home.mkdir(parents=True, exist_ok=True)
        return GrpcReceiver(self.command(home, args), home)


__all__ = [
    "CLIENT_VERSION",
    "ApacheProxy",
    "GrpcClient",
    "GrpcReceived",
    "GrpcReceiver",
    "GrpcSent",
    "Proxy",
]
