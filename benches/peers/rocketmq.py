"""Apache RocketMQ (the Java original) as a peer: name server, brokers and a Java client.

Benches and the interop tests (``tests/interop/``) share this module. Nothing is installed
system-wide: the pinned RocketMQ jars are resolved once with Maven (``java/pom.xml``, into
``~/.m2``) and the classpath is cached under ``~/.cache/rocketha/rocketmq/<version>/``, beside
the compiled ``java/Peer.java`` (a producer / consumer on the real Java client, recompiled when
its source changes). It needs ``java`` (17), ``javac`` and ``mvn`` on PATH, and Maven Central.

>>> rmq = RocketMQ.resolve("4.9.7")
>>> with rmq.namesrv(tmp / "ns") as ns, rmq.broker(tmp / "b", ns) as b:
...     sent = rmq.produce(ns.address, "T", 10, [100], home=tmp / "p", broker=b.address)

Every process runs on 127.0.0.1 with ports picked free at start, ``ROCKETMQ_HOME`` and
``user.home`` inside the given directory (so logs and stores land there), a 256 MiB heap, and
is stopped (SIGTERM, then SIGKILL) when its ``with`` block ends, whatever happened inside.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketha import _children

#: The pinned versions: the last 4.9 on Maven Central (4.9.8 was never published there) and
#: the newest 5.x whose jars all resolve (5.5.1's broker pom is there, its other jars are not).
VERSION_4 = "4.9.7"
VERSION_5 = "5.4.0"
VERSIONS = (VERSION_4, VERSION_5)

JAVA_DIR = Path(__file__).resolve().with_name("java")
CACHE = Path(os.environ.get("ROCKETHA_CACHE", Path.home() / ".cache" / "rocketha")) / "rocketmq"

#: Small, predictable JVMs: the machines we run on have 2 cores shared with builds.
JVM_FLAGS = [
    "-Xms256m",
    "-Xmx256m",
    "-XX:MaxDirectMemorySize=256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+IgnoreUnrecognizedVMOptions",
]
#: JDK 9+ strong encapsulation: RocketMQ unmaps commit log files through the JDK's internal
#: cleaner (sun.nio.ch.DirectBuffer, java.nio.DirectByteBuffer), which 4.9 reaches by reflection.
JDK17_FLAGS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    # 4.9's MappedFile.clean() calls jdk.internal.ref.Cleaner.clean(): without this its
    # shutdown hook dies unmapping the first file and leaves the abort marker behind.
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
]

#: A client's JVM (Peer, mqadmin): small and quick to start.
CLIENT_JVM = [
    "java",
    "-Xmx128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    *JDK17_FLAGS,
]

MESSAGE_MAGIC = 0xDAA320A7
MESSAGE_MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194


class Unavailable(Exception):
    """A tool the peer needs is missing; the message says which and how to get it."""


def missing_tools() -> str | None:
    """Why RocketMQ cannot run here, or None."""
    missing = [t for t in ("java", "javac", "mvn") if shutil.which(t) is None]
    if missing:
        return (
            f"needs {', '.join(missing)} on PATH "
            "(Debian: apt-get install openjdk-17-jdk-headless maven)"
        )
    return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialises resolution between processes (pytest-xdist, a bench beside a test run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def maven_classpath(pom: Path, properties: dict[str, str], cache: Path) -> str:
    """The classpath of ``pom``'s dependencies with ``properties`` (``-Dk=v``), from
    ``cache`` or resolved by Maven (once; jars into ``~/.m2``). The cache file is keyed by the
    pom's content, so a dependency added to it is resolved on the next use."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    out = cache / f"classpath-{digest}.txt"
    with _locked(cache / ".lock"):
        if out.is_file():
            cp = out.read_text().strip()
            if cp and all(Path(j).is_file() for j in cp.split(os.pathsep)):
                return cp
        proc = _children.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(pom),
                *(f"-D{k}={v}" for k, v in properties.items()),
                "dependency:build-classpath",
                f"-Dmdep.outputFile={out}",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0 or not out.is_file():
            raise Unavailable(
                f"mvn could not resolve {pom} with {properties}:\n"
                f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
            )
        return out.read_text().strip()


def compile_java(files: Sequence[Path], classpath: str, cache: Path) -> Path:
    """Java source ``files`` compiled against ``classpath`` into a directory under ``cache``,
    cached by source hash (recompiled when a source changes)."""
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in files) + classpath.encode())
    out = cache / f"classes-{digest.hexdigest()[:16]}"
    with _locked(cache / ".lock"):
        if not all((out / f"{s.stem}.class").is_file() for s in files):
            tmp = out.with_name(out.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            proc = _children.run(
                ["javac", "-nowarn", "-cp", classpath, "-d", str(tmp), *map(str, files)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"javac {' '.join(map(str, files))}:\n{proc.stderr}")
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
    return out


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free TCP ports (a broker uses listenPort - 2 for its
    fast channel, listenPort, and listenPort + 1 for HA)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("0.0.0.0", 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports found")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


#: What a 4.9 process logs with: logback, configured from $ROCKETMQ_HOME/conf (5.x ships its
#: own configuration in its jars and writes under ${user.home}/logs/rocketmqlogs).
_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/logs/{name}.log</file>
    <encoder>
      <pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{0}} - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def rocketmq_home(home: Path) -> dict[str, str]:
    """Makes ``home`` a ``ROCKETMQ_HOME`` (the logback files a 4.9 process configures itself
    from); the environment a RocketMQ process runs in there."""
    (home / "conf").mkdir(parents=True, exist_ok=True)
    for name in ("broker", "namesrv", "tools"):
        (home / "conf" / f"logback_{name}.xml").write_text(_LOGBACK.format(name=name))
    return {**os.environ, "ROCKETMQ_HOME": str(home), "HOME": str(home)}


class JavaProcess:
    """A peer's JVM (RocketMQ's, or Kafka's in ``kafka.py``) running ``main`` on ``classpath``
    with ``jvm`` flags; ``stdout.log`` in its home collects what it prints. The RocketMQ
    settings (``ROCKETMQ_HOME``, logback files under ``conf/``) are inert for other peers."""

    kind = "process"

    def __init__(
        self,
        classpath: str,
        home: Path,
        main: str,
        args: Sequence[str],
        jvm: Sequence[str] = JVM_FLAGS,
    ) -> None:
        self.home = home
        env = rocketmq_home(home)
        self.stdout = home / "stdout.log"
        # A restart in the same home appends: only what this process printed counts.
        self._stdout_from = self.stdout.stat().st_size if self.stdout.exists() else 0
        command = [
            "java",
            *jvm,
            *JDK17_FLAGS,
            f"-Duser.home={home}",
            f"-Drocketmq.home.dir={home}",
            "-Drocketmq.client.logUseSlf4j=false",
            "-cp",
            classpath,
            main,
            *args,
        ]
        # `java` itself, not a script around it: the parent-death signal reaches the JVM.
        with self.stdout.open("ab") as out:
            self.proc = _children.spawn(
                command,
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, port: int, line: str = "", timeout: float = 90.0) -> None:
        """Until ``port`` accepts connections and the process printed ``line`` (if given)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.kind} exited with {self.proc.returncode} before it was ready:\n"
                    f"{self.output()[-4000:]}"
                )
            if line in self.output() and port_open(port):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"{self.kind} not ready in {timeout} s:\n{self.output()[-4000:]}"
                )
            time.sleep(0.05)

    def output(self) -> str:
        """What this process printed (stdout and stderr)."""
        try:
            with self.stdout.open("rb") as f:
                f.seek(self._stdout_from)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def logs(self, pattern: str = "*.log") -> str:
        """Every log file the process wrote under its home (5.x: logs/rocketmqlogs/)."""
        out = []
        for path in sorted((self.home / "logs").rglob(pattern)):
            out.append(f"== {path.relative_to(self.home)}\n{path.read_text(errors='replace')}")
        return "\n".join(out)

    def grep(self, needle: str) -> list[str]:
        return [line for line in self.logs().splitlines() if needle in line]

    def kill(self) -> int:
        """SIGKILL: for a process whose store is read afterwards only through its files (mmap'd
        writes are in the page cache already), skipping RocketMQ's slow graceful shutdown."""
        return _children.kill(self.proc)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (RocketMQ's shutdown hook flushes and unmaps), SIGKILL after ``timeout``."""
        return _children.stop(self.proc, timeout)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NameServer(JavaProcess):
    kind = "namesrv"

    def __init__(
        self, rmq: RocketMQ, home: Path, jvm: Sequence[str] = JVM_FLAGS, **keys: Any
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        base = free_ports(1)
        self.port = base
        conf = home / "namesrv.conf"
        keys = {"listenPort": base, "rocketmqHome": home, **keys}
        conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        main = "org.apache.rocketmq.namesrv.NamesrvStartup"
        super().__init__(rmq.classpath, home, main, ["-c", str(conf)], jvm)
        self.wait_ready(self.port, "boot success")

    def wait_registered(self, broker_port: int, timeout: float = 60.0) -> None:
        """Until a broker on ``broker_port`` registered. Clients only find a broker's topics
        after that, and a 5.x broker first registers about 10 s after it booted (the attempt
        at start-up races the scan that finds a reachable name server). ``produce`` and
        ``consume`` with ``broker=`` do not need this: creating the topic on the broker makes
        it register at once."""
        needle = f"127.0.0.1:{broker_port}"
        deadline = time.monotonic() + timeout
        while not any(
            "new broker registered" in line and needle in line for line in self.logs().splitlines()
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker {needle} did not register in {timeout} s")
            time.sleep(0.1)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class JavaBroker(JavaProcess):
    """``BrokerStartup -c broker.conf``. ``conf`` keys are RocketMQ's; the harness sets the
    ports, paths and a small store unless given."""

    kind = "broker"

    def __init__(
        self,
        rmq: RocketMQ,
        home: Path,
        namesrv: NameServer | None = None,
        jvm: Sequence[str] = JVM_FLAGS,
        **conf: Any,
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        base = free_ports(4)
        self.listen_port = base + 2
        self.ha_port = base + 3
        store = Path(conf.pop("storePathRootDir", home / "store"))
        keys: dict[str, Any] = {
            "brokerClusterName": "InteropCluster",
            "brokerName": "interop-a",
            "brokerId": 0,
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "brokerIP1": "127.0.0.1",
            # The HA address the broker registers with the name server.
            "brokerIP2": "127.0.0.1",
            "listenPort": self.listen_port,
            # 4.9 always takes listenPort + 1; 5.x takes this key. Both agree this way.
            "haListenPort": self.ha_port,
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": 1 << 20,
            "rocketmqHome": home,
            "autoCreateTopicEnable": "true",
            "diskMaxUsedSpaceRatio": 95,
            # Not needed here, and each costs threads or files on a 2-core machine.
            "enableCalcFilterBitMap": "false",
            "traceTopicEnable": "false",
        }
        if namesrv is not None:
            keys["namesrvAddr"] = namesrv.address
        keys.update(conf)
        self.store = Path(keys["storePathRootDir"])
        self.conf = keys
        conf_file = home / "broker.conf"
        conf_file.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        main = "org.apache.rocketmq.broker.BrokerStartup"
        super().__init__(rmq.classpath, home, main, ["-c", str(conf_file)], jvm)
        self.wait_ready(self.listen_port, "boot success")
        if rmq.major >= 5 and keys["brokerRole"] == "SLAVE" and keys.get("haMasterAddress"):
            # RocketMQ 5 drops broker.conf's haMasterAddress (its HA client is created after
            # the address was handed over; apache/rocketmq#6153): tell it again, at run time.
            try:
                rmq.set_ha_master(self.address, str(keys["haMasterAddress"]), home=home / "admin")
            except BaseException:
                self.kill()
                raise

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    @property
    def ha_address(self) -> str:
        return f"127.0.0.1:{self.ha_port}"


def retry_ports(start: Any, attempts: int = 3) -> Any:
    """Free ports are probed, then bound by the JVM seconds later: on a shared machine another
    process can take one in between. Such a start is retried on fresh ports."""
    for attempt in range(attempts):
        try:
            return start()
        except RuntimeError as e:
            if "Address already in use" not in str(e) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Sent:
    """One ``SendResult`` of the Java producer."""

    seq: int
    status: str
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    body_len: int
    body_crc: int
    #: The delay level it was sent with (0: none); delayed ones wait in SCHEDULE_TOPIC_XXXX.
    delay_level: int = 0

    @property
    def commit_log_offset(self) -> int:
        """From the offset message id: store host (8 bytes) + commit log offset (8)."""
        return int(self.offset_msg_id[16:32], 16)


@dataclass(frozen=True)
class SendOutcome:
    """One ``send`` result line of ``Peer.java``: a ``SendResult`` (``status`` set), an
    exception (``error``: its class and message), a broker's refusal (``code``, the remark in
    ``error``), or a oneway send (none of them)."""

    seq: int
    status: str | None = None
    msg_id: str = ""
    offset_msg_id: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    error: str | None = None
    code: int | None = None


@dataclass(frozen=True)
class Received:
    """One message the Java consumer read."""

    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body_len: int
    body_crc: int
    tags: str


class RocketMQ:
    """One pinned RocketMQ version, resolved and ready to start."""

    _resolved: dict[str, RocketMQ] = {}  # a process-wide cache

    def __init__(self, version: str, classpath: str, peer: Path) -> None:
        self.version = version
        self.classpath = classpath
        self.peer = peer

    @classmethod
    def resolve(cls, version: str) -> RocketMQ:
        """Resolves (Maven, once per machine) and compiles (once per source) ``version``."""
        if version not in cls._resolved:
            why = missing_tools()
            if why:
                raise Unavailable(why)
            cache = CACHE / version
            cp = maven_classpath(JAVA_DIR / "pom.xml", {"rocketmq.version": version}, cache)
            classes = compile_java(sorted(JAVA_DIR.glob("*.java")), cp, cache)
            cls._resolved[version] = cls(version, cp, classes)
        return cls._resolved[version]

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def namesrv(self, home: Path, *, jvm: Sequence[str] = JVM_FLAGS, **conf: Any) -> NameServer:
        """A name server with RocketMQ's ``conf`` keys besides its port and home."""
        return retry_ports(lambda: NameServer(self, home, jvm, **conf))

    def broker(
        self,
        home: Path,
        namesrv: NameServer | None = None,
        *,
        jvm: Sequence[str] = JVM_FLAGS,
        **conf: Any,
    ) -> JavaBroker:
        """A broker with RocketMQ's ``conf`` keys on ``jvm`` flags (default: the harness's
        small, quick-starting JVM)."""
        return retry_ports(lambda: JavaBroker(self, home, namesrv, jvm, **conf))

    def _peer_command(
        self, home: Path, args: Sequence[str], jvm: Sequence[str] = (), main: str = "Peer"
    ) -> list[str]:
        """``Peer ARGS`` (or another tool of ``java/``, ``main``); ``jvm``: extra flags, such as
        the client's system properties (``-Dtls.enable=true`` is ``useTLS`` for every client
        the JVM makes)."""
        home.mkdir(parents=True, exist_ok=True)
        return [
            *CLIENT_JVM,
            *jvm,
            f"-Duser.home={home}",
            "-Drocketmq.client.logRoot=" + str(home / "logs"),
            "-cp",
            f"{self.peer}{os.pathsep}{self.classpath}",
            main,
            *args,
        ]

    def producer_command(
        self, home: Path, namesrv: str, topic: str, count: int, size: int, group: str
    ) -> list[str]:
        """The command of a ``DefaultMQProducer`` that sends ``count`` messages of ``size``
        bytes one at a time, with no retry, printing each ``SENT seq STATUS msgId ...`` line as
        its answer comes and stopping at the first failed send: for a caller that reads them
        while it happens (a fault test that kills the broker mid-run)."""
        return self._peer_command(
            home, ["produce", namesrv, "-", topic, group, str(count), str(size), "0"]
        )

    def _client(
        self, home: Path, args: Sequence[str], timeout: float, jvm: Sequence[str] = ()
    ) -> list[str]:
        proc = _children.run(
            self._peer_command(home, args, jvm),
            cwd=home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        (home / f"peer-{args[0]}.out").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            # stderr starts with pages of logback status lines; the cause is at the end. The
            # client's own log says why a connection closed, which its exceptions do not.
            log = home / "logs" / "rocketmq_client.log"
            client_log = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(
                f"Peer {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
                f"\n{log.name}:\n{client_log}"
            )
        return proc.stdout.splitlines()

    def mqadmin_command(self, home: Path, *args: str) -> list[str]:
        """The command line of ``mqadmin ARGS``, for a caller that runs it itself (in
        ``home``, with :func:`rocketmq_home` as its environment)."""
        return [
            *CLIENT_JVM,
            f"-Duser.home={home}",
            "-Drocketmq.client.logUseSlf4j=false",
            "-cp",
            self.classpath,
            "org.apache.rocketmq.tools.command.MQAdminStartup",
            *args,
        ]

    def mqadmin(self, home: Path, *args: str, timeout: float = 120.0) -> str:
        """``mqadmin ARGS`` (rocketmq-tools' ``MQAdminStartup``, a dependency of the broker
        jar) with ``home`` as its ``ROCKETMQ_HOME``: what it printed (stdout and stderr). It
        exits 0 even when a command fails (it prints the exception), so callers check the
        output."""
        proc = _children.run(
            self.mqadmin_command(home, *args),
            cwd=home,
            env=rocketmq_home(home),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out = proc.stdout + proc.stderr
        (home / f"mqadmin-{args[0]}.out").write_text(out)
        if proc.returncode != 0:
            raise RuntimeError(f"mqadmin {' '.join(args)} exited {proc.returncode}:\n{out[-4000:]}")
        return out

    def load(
        self,
        namesrv: str,
        topic: str,
        connections: int,
        seconds: float,
        size: int = 1024,
        *,
        home: Path,
        broker: str | None = None,
        warmup: float = 1.0,
        threads: int | None = None,
    ) -> dict[str, Any]:
        """Runs the load generator (``java/Load.java``): ``connections`` ``DefaultMQProducer``
        s, one client instance (so one connection) each, and ``threads`` (default one a
        producer) synchronous senders spread over them, sending ``size``-byte messages to
        ``topic`` for ``seconds`` after ``warmup``; with ``broker`` (host:port) the topic is
        created there first (4 queues). Returns its JSON line: ``sent``, ``ok`` (SEND_OK),
        ``statuses``, ``p50_us``, ``p99_us``, ``p999_us``, ``seconds``, and ``cpu_s``, the
        client JVM's CPU time over those seconds."""
        threads = threads or connections
        args = [namesrv, broker or "-", topic, str(connections), str(seconds), str(size)]
        args += [str(warmup), str(threads)]
        return self._bench_tool(
            home, "Load", args, f"load-{connections}x{threads}", seconds + warmup + 120 + threads
        )

    def drain(
        self,
        namesrv: str,
        topic: str,
        messages: int,
        *,
        home: Path,
        group: str = "bench-drain",
        timeout: float = 600.0,
    ) -> dict[str, Any]:
        """``java/Drain.java``: one ``DefaultLitePullConsumer`` of a new ``group`` reads
        ``messages`` messages of ``topic`` from its first offset, from whichever broker the
        brokers suggest; returns ``{"messages", "bytes", "seconds"}`` (bodies' bytes, timed
        from the first poll that returned messages)."""
        args = [namesrv, topic, group, str(messages), str(timeout)]
        return self._bench_tool(home, "Drain", args, f"drain-{group}", timeout + 120)

    def _bench_command(self, home: Path, main: str, args: Sequence[str]) -> list[str]:
        """``main ARGS`` on a bench client's JVM: its JIT and a parallel GC, unlike the tests'
        quick-starting one."""
        home.mkdir(parents=True, exist_ok=True)
        return [
            "java",
            "-Xms256m",
            "-Xmx256m",
            "-XX:+UseParallelGC",
            "-XX:-UsePerfData",
            *JDK17_FLAGS,
            f"-Duser.home={home}",
            "-Drocketmq.client.logRoot=" + str(home / "logs"),
            "-Drocketmq.client.logLevel=WARN",
            "-cp",
            f"{self.peer}{os.pathsep}{self.classpath}",
            main,
            *args,
        ]

    def _bench_tool(
        self, home: Path, main: str, args: Sequence[str], name: str, timeout: float
    ) -> dict[str, Any]:
        """A bench client (``Load``, ``Drain``) on a JVM with its JIT and a parallel GC, unlike
        the tests' quick-starting one; its last JSON line."""
        proc = _children.run(
            self._bench_command(home, main, args),
            cwd=home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        (home / f"{name}.out").write_text(proc.stdout + proc.stderr)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(
                f"{main} {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def set_ha_master(self, broker: str, ha_address: str, *, home: Path) -> None:
        """Sends a 5.x slave at ``broker`` its master's HA address (EXCHANGE_BROKER_HA_INFO)."""
        lines = self._client(home, ["set-ha-master", broker, ha_address], 60)
        if "OK" not in lines:
            raise RuntimeError(f"set-ha-master {broker} {ha_address}: {lines}")

    def produce(
        self,
        namesrv: str,
        topic: str,
        count: int,
        sizes: Sequence[int],
        *,
        home: Path,
        broker: str | None = None,
        group: str = "interop-producer",
        delay_every: int = 0,
        timeout: float = 120.0,
    ) -> list[Sent]:
        """Sends ``count`` messages with ``DefaultMQProducer`` (bodies: :func:`body`); with
        ``broker`` (host:port) the topic is created there first, with 4 queues; with
        ``delay_every`` n, every n-th message gets delay level 4 (30 s)."""
        lines = self._client(
            home,
            [
                "produce",
                namesrv,
                broker or "-",
                topic,
                group,
                str(count),
                ",".join(map(str, sizes)),
                str(delay_every),
            ],
            timeout,
        )
        out = []
        for line in lines:
            if line.startswith("SENT "):
                f = line.split()
                numbers = [int(x) for x in f[5:10]]
                out.append(Sent(int(f[1]), f[2], f[3], f[4], *numbers))
        return out

    def send(
        self,
        namesrv: str,
        topic: str,
        style: str,
        count: int,
        prefix: str,
        *,
        home: Path,
        broker: str | None = None,
        group: str = "interop-sender",
        timeout: float = 120.0,
        jvm: Sequence[str] = (),
    ) -> list[SendOutcome]:
        """Sends ``count`` messages with bodies ``f"{prefix}-{seq}"`` in one ``style`` (sync,
        async, oneway, batch) with ``DefaultMQProducer``; with ``broker`` the topic is created
        there first. A batch gives one outcome (seq -1), oneway sends give one without status.
        ``jvm``: extra JVM flags (:meth:`_peer_command`)."""
        lines = self._client(
            home,
            ["send", namesrv, broker or "-", topic, group, style, str(count), prefix],
            timeout,
            jvm,
        )
        if "DONE" not in lines:
            raise RuntimeError(f"Peer send {style} did not finish: {lines}")
        return _outcomes(lines)

    def consume(
        self,
        namesrv: str,
        topic: str,
        expected: int,
        *,
        home: Path,
        broker: str | None = None,
        group: str = "interop-consumer",
        timeout_ms: int = 60_000,
        jvm: Sequence[str] = (),
    ) -> list[Received]:
        """Reads every queue of ``topic`` from offset 0 with ``DefaultLitePullConsumer`` until
        ``expected`` messages or the timeout; with ``broker`` the topic is created there
        first (4 queues), as a broker started on an existing store has no topic config.
        ``jvm``: extra JVM flags (:meth:`_peer_command`)."""
        lines = self._client(
            home,
            ["consume", namesrv, broker or "-", topic, group, str(expected), str(timeout_ms)],
            timeout_ms / 1000 + 60,
            jvm,
        )
        return _received(lines)

    def acl(
        self,
        namesrv: str,
        topic: str,
        forbidden_topic: str,
        access_key: str,
        secret_key: str,
        *,
        home: Path,
        group: str = "interop-acl",
    ) -> tuple[list[SendOutcome], list[Received]]:
        """``AclClientRPCHook`` in one JVM: a send with the right keys to ``topic`` (seq 0), one
        with a wrong secret key (1), one to ``forbidden_topic`` (2), then the right keys
        consume ``topic`` as ``group``. A refused send's outcome has the broker's response
        ``code`` and its remark as ``error``."""
        args = ["acl", namesrv, topic, forbidden_topic, group, access_key, secret_key]
        lines = self._client(home, args, 120)
        return _outcomes(lines), _received(lines)

    def create_topic(
        self, namesrv: str, key: str, topic: str, queues: int, *, home: Path
    ) -> list[tuple[str, int, int, int]]:
        """``DefaultMQAdminExt.createTopic(key, topic, queues)`` (``key``: a cluster or broker
        name), then ``examineTopicStats(topic)``: ``(broker name, queue id, min offset, max
        offset)`` of each queue."""
        lines = self._client(home, ["create-topic", namesrv, key, topic, str(queues)], 120)
        stats = [line.split()[1:] for line in lines if line.startswith("STATS ")]
        return sorted((b, int(q), int(lo), int(hi)) for b, q, lo, hi in stats)

    def query(
        self, namesrv: str, topic: str, keys: int, lookups: int, *, home: Path
    ) -> list[float]:
        """``DefaultMQAdminExt.queryMessage`` of ``lookups`` random keys among ``k0`` ..
        ``k{keys-1}`` (what :meth:`produce` sets), one at a time: each lookup's microseconds.
        A key found nowhere fails the run."""
        lines = self._client(home, ["query", namesrv, topic, str(keys), str(lookups)], 600)
        timed = [line.split() for line in lines if line.startswith("LOOKUP ")]
        missing = [t for t in timed if t[2] == "0"]
        if len(timed) != lookups or missing:
            raise RuntimeError(f"query: {len(timed)} lookups timed, {len(missing)} found nothing")
        return [float(t[1]) for t in timed]

    def group(
        self,
        namesrv: str,
        topic: str,
        group: str,
        kind: str,
        at_least: int,
        *,
        home: Path,
        timeout_ms: int = 90_000,
        sql: str | None = None,
    ) -> list[tuple[int, int, str]]:
        """One member of consumer group ``group`` (``kind``: ``lite`` for
        ``DefaultLitePullConsumer``, ``push`` for ``DefaultMQPushConsumer``, ``orderly`` for
        one with a ``MessageListenerOrderly``) reading ``topic``
        from the group's committed offsets until it has ``at_least`` messages, then shutting
        down (which commits); subscribed to every tag, or with ``MessageSelector.bySql(sql)``.
        Returns ``(queue_id, queue_offset, body)`` of each message it was given, duplicates
        included."""
        args = ["group", namesrv, topic, group, kind, str(at_least), str(timeout_ms)]
        lines = self._client(home, args + ([sql] if sql else []), timeout_ms / 1000 + 60)
        if not any(line.startswith("DONE ") for line in lines):
            raise RuntimeError(f"Peer group {kind} did not finish: {lines[-20:]}")
        return _got(lines)

    def send_props(
        self, namesrv: str, topic: str, props: Sequence[dict[str, str]], *, home: Path
    ) -> list[SendOutcome]:
        """One ``DefaultMQProducer.send`` a dict of ``props``: its user properties (``TAGS``:
        the message's tag), body ``p-<index>``."""
        encoded = [";".join(f"{k}={v}" for k, v in p.items()) for p in props]
        lines = self._client(home, ["send-props", namesrv, topic, f"{topic}-props", *encoded], 120)
        return _outcomes(lines)

    def reconsume(
        self,
        namesrv: str,
        topic: str,
        group: str,
        max_reconsume_times: int,
        calls: int,
        *,
        home: Path,
        timeout_ms: int = 120_000,
    ) -> list[Reconsumed]:
        """A ``DefaultMQPushConsumer`` of ``group`` that answers ``RECONSUME_LATER`` to every
        message of ``topic`` (``maxReconsumeTimes`` = ``max_reconsume_times``) until it was
        called ``calls`` times: each call, in order."""
        args = ["reconsume", namesrv, topic, group, str(max_reconsume_times), str(calls)]
        lines = self._client(home, [*args, str(timeout_ms)], timeout_ms / 1000 + 60)
        out = []
        for line in lines:
            if line.startswith("CALL "):
                _, ms, body, times, got_topic = line.split(" ")
                out.append(Reconsumed(int(ms) / 1000, body, int(times), got_topic))
        return out

    def group_member(
        self,
        namesrv: str,
        topic: str,
        group: str,
        kind: str,
        *,
        home: Path,
        jvm: Sequence[str] = (),
    ) -> GroupMember:
        """Like :meth:`group`, but running until :meth:`GroupMember.stop`, so several
        members of one group consume side by side; ``jvm`` as :meth:`_peer_command`'s."""
        args = ["group", namesrv, topic, group, kind, "0", "600000"]
        return GroupMember(self._peer_command(home, args, jvm), home)

    def transactor(
        self,
        namesrv: str,
        topic: str,
        group: str,
        states: Sequence[str] = (),
        *,
        home: Path,
        broker: str | None = None,
        deadline_ms: int = 600_000,
    ) -> Transactor:
        """A running ``TransactionMQProducer`` of ``group`` (``Peer transact``): one
        transaction a state of ``states`` at once, more with :meth:`Transactor.send`, each
        local transaction doing what its state says (:data:`TX_STATES`); it answers the
        broker's check-backs until :meth:`Transactor.stop` or ``deadline_ms``. With ``broker``
        the topic is created there first (4 queues)."""
        args = ["transact", namesrv, broker or "-", topic, group, str(deadline_ms), *states]
        return Transactor(self._peer_command(home, args), home)

    def tx_load(
        self,
        namesrv: str,
        topic: str,
        connections: int,
        seconds: float,
        size: int = 1024,
        *,
        home: Path,
        transactional: bool,
        broker: str | None = None,
        warmup: float = 1.0,
    ) -> dict[str, Any]:
        """``java/TxLoad.java``: :meth:`load`'s loop, ``connections`` threads each with a
        ``TransactionMQProducer`` of its own, sending ``size``-byte messages for ``seconds``
        after ``warmup``: ``sendMessageInTransaction`` with a local transaction that commits at
        once (``transactional``), or a plain synchronous ``send`` of the same producers. Its
        JSON line has :meth:`load`'s keys and ``total_ok``, the SEND_OK sends of the whole run
        (warm-up included): what the topic holds once every commit landed."""
        args = [namesrv, broker or "-", topic, str(connections), str(seconds), str(size)]
        args += [str(warmup), "tx" if transactional else "plain"]
        name = f"txload-{'tx' if transactional else 'plain'}-{connections}"
        return self._bench_tool(home, "TxLoad", args, name, seconds + warmup + 120 + connections)

    def timer_send(
        self,
        namesrv: str,
        topic: str,
        count: int,
        *,
        home: Path,
        mode: str = "ahead",
        at_ms: int = 0,
        size: int = 128,
        inflight: int = 64,
        rate: float = 0.0,
        broker: str | None = None,
        group: str = "timer-producer",
        lines: bool = True,
        bench: bool = False,
        timeout: float = 600.0,
    ) -> TimerSendRun:
        """``TimerPeer send``: ``count`` messages of ``size`` bytes from one
        ``DefaultMQProducer``, asynchronously with at most ``inflight`` unanswered, paced at
        ``rate``/s (0: as fast as the answers come). ``mode``: ``ahead`` (TIMER_DELIVER_MS =
        the send's time + ``at_ms``), ``at`` (TIMER_DELIVER_MS = ``at_ms``, epoch ms, for every
        message) or ``plain`` (none). With ``broker`` the topic is created there first; with
        ``lines`` each send's answer is kept (:attr:`TimerSendRun.sent`); ``bench`` runs it on
        the bench clients' JVM (JIT, parallel GC)."""
        args = ["send", namesrv, broker or "-", topic, group, str(count), str(size)]
        args += [str(inflight), mode, str(at_ms), str(rate), "lines" if lines else "summary"]
        command = (
            self._bench_command(home, "TimerPeer", args)
            if bench
            else self._peer_command(home, args, main="TimerPeer")
        )
        proc = _children.run(command, cwd=home, capture_output=True, text=True, timeout=timeout)
        (home / f"timer-send-{topic}.out").write_text(proc.stdout + proc.stderr)
        out = proc.stdout.splitlines()
        summary = [line for line in out if line.startswith("{")]
        if proc.returncode != 0 or not summary:
            raise RuntimeError(
                f"TimerPeer {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        failures = [line for line in out if line.startswith("TFAIL ")]
        return TimerSendRun(json.loads(summary[-1]), _timer_sent(out), failures)

    def timer_receiver(
        self,
        namesrv: str,
        topic: str,
        group: str,
        count: int,
        *,
        home: Path,
        timeout_ms: int = 120_000,
        lines: bool = True,
        bench: bool = False,
    ) -> TimerReceiver:
        """``TimerPeer receive`` in the background: a ``DefaultMQPushConsumer`` of a fresh
        ``group`` reading ``topic`` from its first offset until ``count`` timer messages (each
        counted once) or ``timeout_ms``; :attr:`TimerReceiver.ready` once it holds the topic's
        queues. ``lines`` and ``bench`` as :meth:`timer_send`'s."""
        args = ["receive", namesrv, topic, group, str(count), str(timeout_ms)]
        args.append("lines" if lines else "summary")
        command = (
            self._bench_command(home, "TimerPeer", args)
            if bench
            else self._peer_command(home, args, main="TimerPeer")
        )
        return TimerReceiver(command, home)


@dataclass(frozen=True)
class Reconsumed:
    """One call of :meth:`RocketMQ.reconsume`'s listener."""

    #: Epoch seconds.
    at: float
    body: str
    reconsume_times: int
    topic: str


def _outcomes(lines: Sequence[str]) -> list[SendOutcome]:
    """The ``RESULT``, ``REFUSED``, ``ERROR`` and ``ONEWAY`` lines of ``Peer.java``, by seq."""
    out = []
    for line in lines:
        f = line.split(" ")
        if f[0] == "RESULT":
            out.append(SendOutcome(int(f[1]), f[2], f[3], f[4], int(f[5]), int(f[6])))
        elif f[0] == "REFUSED":
            out.append(SendOutcome(int(f[1]), code=int(f[2]), error=" ".join(f[3:])))
        elif f[0] == "ERROR":
            out.append(SendOutcome(int(f[1]), error=" ".join(f[2:])))
        elif f[0] == "ONEWAY":
            out.append(SendOutcome(int(f[1])))
    return sorted(out, key=lambda o: o.seq)


def _received(lines: Sequence[str]) -> list[Received]:
    """The ``MSG`` lines of ``Peer.java``."""
    out = []
    for line in lines:
        if line.startswith("MSG "):
            f = line.split()
            out.append(Received(int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5]), f[6]))
    return out


def _got(lines: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(queue_id, queue_offset, body)`` of each ``GOT`` line."""
    out = []
    for line in lines:
        if line.startswith("GOT "):
            f = line.split(" ", 3)
            out.append((int(f[1]), int(f[2]), f[3]))
    return out


class PeerProcess:
    """A ``Peer`` mode that runs until told to stop: its stdin stays open for commands, and
    every line it prints is kept in :attr:`lines` by a reader thread; its stderr goes to
    ``home / f"peer-{mode}.err"``."""

    def __init__(self, command: list[str], home: Path, mode: str) -> None:
        self.home = home
        self.mode = mode
        self.lines: list[str] = []
        with (home / f"peer-{mode}.err").open("w") as err:
            self.proc = _children.spawn(
                command,
                cwd=home,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def stderr(self) -> str:
        return (self.home / f"peer-{self.mode}.err").read_text(errors="replace")

    @property
    def ready(self) -> bool:
        """Whether it printed ``READY`` (each mode says what that means)."""
        return "READY" in self.lines

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until it printed ``READY``; raises if it exits or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{' '.join(self.proc.args[-8:])} not ready: {self.lines[-20:]}\n"
                    f"{self.stderr()[-3000:]}"
                )
            time.sleep(0.01)

    def stop(self, timeout: float = 120.0) -> None:
        """Closes its input: it finishes what is under way, shuts down and exits; its lines are
        kept in ``home / peer-MODE.out``. Raises unless it exited 0 after printing ``DONE``."""
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            _children.kill(self.proc)
        self._reader.join(timeout)
        (self.home / f"peer-{self.mode}.out").write_text("\n".join(self.lines))
        if code != 0 or not any(line.startswith("DONE ") for line in self.lines):
            raise RuntimeError(
                f"Peer {self.mode} exited {code}: {self.lines[-20:]}\n{self.stderr()[-3000:]}"
            )


class GroupMember(PeerProcess):
    """A running ``Peer group`` member; what it received so far is in :attr:`received`."""

    def __init__(self, command: list[str], home: Path) -> None:
        super().__init__(command, home, "group")

    @property
    def received(self) -> list[tuple[int, int, str]]:
        return _got(list(self.lines))

    @property
    def members_seen(self) -> int:
        """The group's member count at this member's last rebalance (0 before the first)."""
        counts = [int(line.split()[1]) for line in list(self.lines) if line.startswith("MEMBERS ")]
        return counts[-1] if counts else 0

    def kill(self) -> list[tuple[int, int, str]]:
        """SIGKILLs it mid-stream (no shutdown, no commit, its locks left to expire). Returns
        what it got."""
        _children.kill(self.proc)
        self._reader.join(30)
        (self.home / "peer-group.out").write_text("\n".join(self.lines))
        return self.received

    def finish(self, timeout: float = 120.0) -> list[tuple[int, int, str]]:
        """Closes its input: it shuts down (committing) and exits. Returns what it got."""
        self.stop(timeout)
        return self.received


#: What ``Peer transact``'s local transactions do, by the state a message carries (its
#: ``txLocal`` property and the end of its key): answer at once (executeLocalTransaction), or
#: UNKNOW and then what the broker's check-back is told (checkLocalTransaction);
#: ``held-then-commit`` answers UNKNOW until :meth:`Transactor.release`, then commits.
TX_STATES = (
    "commit",
    "rollback",
    "unknown-then-commit",
    "unknown-then-rollback",
    "unknown-forever",
    "held-then-commit",
)


@dataclass(frozen=True)
class TxSent:
    """One ``sendMessageInTransaction`` of ``Peer transact``: its ``TransactionSendResult``
    (``status`` set), or its failure (``error``; ``code``, the broker's response code, -1
    when the failure was not a broker's answer)."""

    seq: int
    key: str
    status: str | None = None
    #: What executeLocalTransaction answered (COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW).
    local_state: str | None = None
    msg_id: str = ""
    transaction_id: str = ""
    offset_msg_id: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    code: int | None = None
    error: str | None = None

    @property
    def state(self) -> str:
        return self.key.split("-", 1)[1]


@dataclass(frozen=True)
class TxCheck:
    """One check-back (CHECK_TRANSACTION_STATE) ``Peer transact`` was asked and answered."""

    key: str
    transaction_id: str
    #: How many times this producer was asked about ``key`` so far, this one included.
    times: int
    #: What checkLocalTransaction answered.
    answer: str
    #: The checked message as the broker sent it: the half message it checks.
    msg_id: str
    queue_offset: int
    commit_log_offset: int
    properties: dict[str, str]


def _tx_sent(line: str) -> TxSent | None:
    f = line.split(" ")
    if f[0] == "TXSENT":
        numbers = int(f[8]), int(f[9])
        return TxSent(int(f[1]), f[2], f[3], f[4], f[5], f[6], f[7], *numbers)
    if f[0] == "TXERROR":
        return TxSent(int(f[1]), f[2], code=int(f[3]), error=" ".join(f[4:]))
    return None


def _tx_check(line: str) -> TxCheck | None:
    f = line.split(" ")
    if f[0] != "CHECK":
        return None
    props = {} if f[8] == "-" else dict(urllib.parse.parse_qsl(f[8], keep_blank_values=True))
    return TxCheck(f[1], f[2], int(f[3]), f[4], f[5], int(f[6]), int(f[7]), props)


class Transactor(PeerProcess):
    """A running ``Peer transact`` (:meth:`RocketMQ.transactor`): what it printed so far is
    in :attr:`lines`, parsed by :attr:`sent` and :attr:`checks`."""

    def __init__(self, command: list[str], home: Path) -> None:
        super().__init__(command, home, "transact")

    def send(self, *states: str) -> None:
        """One more transaction a state, sent after those before."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{s}\n" for s in states))
        self.proc.stdin.flush()

    def release(self) -> None:
        """From now on ``held-then-commit`` transactions commit at their check-backs."""
        self.send("RELEASE")
        wait = time.monotonic() + 60
        while "RELEASED" not in self.lines:
            if self.proc.poll() is not None or time.monotonic() > wait:
                raise RuntimeError(f"Peer transact did not release: {self.lines[-20:]}")
            time.sleep(0.01)

    @property
    def exited(self) -> int | None:
        return self.proc.poll()

    @property
    def sent(self) -> list[TxSent]:
        """Every send's outcome so far, by seq."""
        out = [t for t in map(_tx_sent, list(self.lines)) if t is not None]
        return sorted(out, key=lambda t: t.seq)

    @property
    def checks(self) -> list[TxCheck]:
        """Every check-back so far, in the order they came."""
        return [c for c in map(_tx_check, list(self.lines)) if c is not None]

    def times_checked(self, key: str) -> int:
        return sum(1 for c in self.checks if c.key == key)

    def kill(self) -> None:
        _children.kill(self.proc)
        self._reader.join(30)
        (self.home / "peer-transact.out").write_text("\n".join(self.lines))

    def __enter__(self) -> Transactor:
        return self

    def __exit__(self, *exc: object) -> None:
        _children.kill(self.proc)


@dataclass(frozen=True)
class TimerSent:
    """One answered send of ``TimerPeer send``."""

    seq: int
    status: str
    msg_id: str
    #: The TIMER_DELIVER_MS it carried (epoch ms); 0 for a plain send.
    due_ms: int
    #: Epoch ms the send was made.
    sent_ms: int


@dataclass(frozen=True)
class TimerSendRun:
    """What ``TimerPeer send`` did: its summary (``sent``, ``ok``, ``failed``, ``seconds``,
    ``rate``: SEND_OK answers a second, ``first_ms``, ``last_ms``, ``cpu_s``) and, with
    ``lines``, each answer and each failure (``failures``: ``TFAIL`` lines)."""

    summary: dict[str, Any]
    sent: list[TimerSent]
    failures: list[str] = field(default_factory=list)


def _timer_sent(lines: Sequence[str]) -> list[TimerSent]:
    out = []
    for line in lines:
        if line.startswith("TSENT "):
            f = line.split(" ")
            out.append(TimerSent(int(f[1]), f[2], f[3], int(f[4]), int(f[5])))
    return sorted(out, key=lambda t: t.seq)


@dataclass(frozen=True)
class TimerGot:
    """One timer message ``TimerPeer receive`` got (its first delivery)."""

    msg_id: str
    #: Its TIMER_DELIVER_MS property as delivered; None when the broker dropped it.
    property_ms: int | None
    #: The due time its body says it was sent with.
    due_ms: int
    received_ms: int

    @property
    def lateness_ms(self) -> int:
        """Receive time - due time: negative means delivered early."""
        return self.received_ms - self.due_ms


class TimerReceiver(PeerProcess):
    """A running ``TimerPeer receive`` (:meth:`RocketMQ.timer_receiver`); it ends by itself
    at its count or its timeout."""

    def __init__(self, command: list[str], home: Path) -> None:
        super().__init__(command, home, "timer-receive")

    @property
    def got(self) -> list[TimerGot]:
        out = []
        for line in list(self.lines):
            if line.startswith("TGOT "):
                _, mid, prop, due, at = line.split(" ")
                out.append(TimerGot(mid, None if prop == "-1" else int(prop), int(due), int(at)))
        return out

    @property
    def summary(self) -> dict[str, Any]:
        """Its last JSON line: ``received``, ``unique``, ``without_property``,
        ``lateness_ms`` and ``stored_lateness_ms`` (``p50``, ``p99``, ``max``, ``min``; the
        second by the delivered copy's store time)."""
        found = [line for line in list(self.lines) if line.startswith("{")]
        if not found:
            raise RuntimeError(f"TimerPeer receive printed no summary: {self.lines[-20:]}")
        result: dict[str, Any] = json.loads(found[-1])
        return result

    def finish(self, timeout: float) -> dict[str, Any]:
        """Waits for it to end: its summary."""
        self.stop(timeout)
        return self.summary

    def __enter__(self) -> TimerReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        _children.kill(self.proc)


def body(seq: int, size: int) -> bytes:
    """The body ``Peer.java`` sends as message ``seq`` (java.util.Random seeded with seq)."""
    return bytes(ord("a") + r for r in _java_random_ints(seq, 26, size))


def _java_random_ints(seed: int, bound: int, count: int) -> Iterator[int]:
    """``java.util.Random(seed).nextInt(bound)``, ``count`` times (an LCG the JDK specifies)."""
    mult, mask = 0x5DEECE66D, (1 << 48) - 1
    state = (seed ^ mult) & mask
    for _ in range(count):
        while True:
            state = (state * mult + 0xB) & mask
            bits = state >> 17
            value = bits % bound
            if bits - value + (bound - 1) < (1 << 31):
                yield value
                break


# -- reading a store written by either side, without rocketha ----------------------------------


def log_segments(store: Path) -> list[Path]:
    return sorted((store / "commitlog").glob("[0-9]" * 20))


def _walk(store: Path) -> Iterator[tuple[int, bytes, int, int]]:
    """Each record of the commit log, message or BLANK padding, by its header (TOTALSIZE,
    MAGIC) from the first segment on: ``(segment start, segment bytes, position, size)``,
    until the first header that is neither (files are full-size and zero past what was
    written: RocketMQ preallocates them)."""
    for path in log_segments(store):
        start = int(path.name)
        data = path.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">iI", data, pos)
            if magic in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2) and 0 < size <= len(data) - pos:
                yield start, data, pos, size
                pos += size
            elif magic == BLANK_MAGIC:
                yield start, data, pos, len(data) - pos
                pos = len(data)
            else:
                break
        if pos < len(data):
            return


def log_end(store: Path) -> int:
    """The commit log's max offset: the end of the last record or BLANK padding."""
    end = 0
    for start, _, pos, size in _walk(store):
        end = start + pos + size
    return end


#: MessageSysFlag's bits for a born / store host of 16 address bytes (20 in all, not 8).
_BORNHOST_V6 = 1 << 4
_STOREHOST_V6 = 1 << 5


@dataclass(frozen=True)
class LogRecord:
    """One message record of a commit log, as stored."""

    offset: int
    topic: str
    #: As stored: compressed if the client compressed it.
    body: bytes
    #: Epoch ms the broker stored it (STORETIMESTAMP).
    store_timestamp: int
    properties: dict[str, str]


def log_records(store: Path) -> Iterator[LogRecord]:
    """Every message record of the commit log (BLANK padding skipped), from its files."""
    for start, data, pos, _ in _walk(store):
        magic = struct.unpack_from(">I", data, pos + 4)[0]
        if magic == BLANK_MAGIC:
            continue
        sys_flag = struct.unpack_from(">i", data, pos + 36)[0]
        at = pos + 48 + (20 if sys_flag & _BORNHOST_V6 else 8)
        (stored_at,) = struct.unpack_from(">q", data, at)
        at += 8 + (20 if sys_flag & _STOREHOST_V6 else 8) + 4 + 8
        (body_len,) = struct.unpack_from(">i", data, at)
        body = data[at + 4 : at + 4 + body_len]
        at += 4 + body_len
        if magic == MESSAGE_MAGIC_V2:
            (topic_len,) = struct.unpack_from(">h", data, at)
            at += 2
        else:
            topic_len = data[at]
            at += 1
        topic = data[at : at + topic_len].decode()
        at += topic_len
        (props_len,) = struct.unpack_from(">h", data, at)
        text = data[at + 2 : at + 2 + props_len].decode(errors="replace")
        # MessageDecoder's NAME_VALUE_SEPARATOR (1) and PROPERTY_SEPARATOR (2).
        pairs = (p.split("\x01", 1) for p in text.split("\x02") if "\x01" in p)
        yield LogRecord(start + pos, topic, body, stored_at, dict(pairs))


def log_messages(store: Path) -> Iterator[tuple[int, str, bytes]]:
    """``(commit log offset, topic, body)`` of every message record of the commit log (the
    body as stored: compressed if the client compressed it)."""
    for r in log_records(store):
        yield r.offset, r.topic, r.body


def log_bytes(store: Path, start: int, end: int) -> bytes:
    """The commit log bytes in [start, end), across segments."""
    out = bytearray()
    for path in log_segments(store):
        seg = int(path.name)
        size = path.stat().st_size
        lo, hi = max(start, seg), min(end, seg + size)
        if lo < hi:
            with path.open("rb") as f:
                f.seek(lo - seg)
                out += f.read(hi - lo)
    return bytes(out)


#: A placeholder RocketMQ writes for queue offsets a store never held (a slave that started
#: mid-log): commit log offset 0, size Integer.MAX_VALUE.
_BLANK_ENTRY_SIZE = 0x7FFFFFFF
Entry = tuple[int, int, int]


def consume_queue(store: Path, topic: str, queue_id: int) -> dict[int, Entry]:
    """The (commit log offset, size, tag hash) entries of one queue by queue offset, across
    its files (named by their first entry's byte position); zero-filled and blank entries (the
    part of a queue a store never held) are left out."""
    out = {}
    for path in sorted((store / "consumequeue" / topic / str(queue_id)).glob("[0-9]" * 20)):
        first = int(path.name) // 20
        data = path.read_bytes().rstrip(b"\0")
        data += b"\0" * (-len(data) % 20)
        for index, entry in enumerate(struct.iter_unpack(">qiq", data)):
            if entry[1] != 0 and entry[1] != _BLANK_ENTRY_SIZE:
                out[first + index] = entry
    return out


def consume_queues(store: Path) -> dict[tuple[str, int], dict[int, Entry]]:
    """Every queue of a store directory, by (topic, queue id)."""
    out = {}
    root = store / "consumequeue"
    if root.is_dir():
        for topic in sorted(p for p in root.iterdir() if p.is_dir()):
            for qid in sorted(p for p in topic.iterdir() if p.name.isdigit()):
                out[(topic.name, int(qid.name))] = consume_queue(store, topic.name, int(qid.name))
    return out


__all__ = [
    "TX_STATES",
    "VERSIONS",
    "VERSION_4",
    "VERSION_5",
    "JavaBroker",
    "JavaProcess",
    "LogRecord",
    "NameServer",
    "Received",
    "RocketMQ",
    "SendOutcome",
    "Sent",
    "TimerGot",
    "TimerReceiver",
    "TimerSendRun",
    "TimerSent",
    "Transactor",
    "TxCheck",
    "TxSent",
    "Unavailable",
    "body",
    "compile_java",
    "consume_queue",
    "consume_queues",
    "free_ports",
    "log_bytes",
    "log_end",
    "log_messages",
    "log_records",
    "log_segments",
    "maven_classpath",
    "missing_tools",
    "port_open",
    "retry_ports",
]
