"""Apache RocketMQ's controller, the one that elects masters in controller mode, run from Python.

rocketha has no consensus of its own: in controller mode (``enableControllerMode=true``) its
brokers register with Apache RocketMQ 5's controller, which elects each group's master from
its SyncStateSet. This module runs that controller on this host: a standalone DLedger
controller group of three ``ControllerStartup`` processes (a quorum survives the loss of one),
as ``rocketha demo --failover`` and the tests do::

    from rocketha.controllers import start_controllers

    with start_controllers(root / "controllers") as ctl:  # three nodes, a leader serving
        print(ctl.controller_addr)  # the brokers' controllerAddr: 127.0.0.1:P0;...;...
        state = ctl.group_state("broker-a")  # the master and SyncStateSet, once registered

What it needs: ``java`` (17 or newer) and ``mvn`` on PATH (Debian: ``apt-get install
openjdk-17-jre-headless maven``), and Maven Central the first time. :func:`classpath`
resolves ``org.apache.rocketmq:rocketmq-controller`` (:data:`VERSION`) and its dependencies
with Maven once, into ``~/.m2``, and caches the classpath under ``$ROCKETHA_CACHE`` (default
``~/.cache/rocketha``); without one of the tools it raises :class:`ControllerUnavailable`
naming what is missing. ``python -m rocketha.controllers`` prints that classpath, for the
``java -cp ... ControllerStartup`` command a person types (see the README), and
``python -m rocketha.controllers --group NAME --controller-addr ADDRS`` a broker group's master
and SyncStateSet at any running controllers (:func:`group_state`).

Each node runs on 127.0.0.1 on a port the OS picked free (its DLedger peer port, which is also
the port brokers list in ``controllerAddr``), with a small heap (:data:`JVM_FLAGS`), its store,
config and logs under its own directory; a node is ready when it printed
:data:`BOOTED` and accepts connections, the group when a leader answers the controller's
requests. Every JVM is started through :mod:`rocketha._children` (its own process group, killed
if this process dies) and stopped when the ``with`` block ends, whatever happened inside.

Why DLedger, RocketMQ's default ``controllerType``: its remoting server is the DLedger peer
port itself (one port a node), and a broker's heartbeat is a plain request. The jRaft
controller takes a second port a node and puts every heartbeat through its Raft log.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rocketha import _children, _core
from rocketha.exceptions import RemotingConnectError, RocketHAError, SendStatusUnknownError

#: The Apache RocketMQ release whose controller is run (the one the interop tests pin).
VERSION = "5.4.0"
MAIN = "org.apache.rocketmq.controller.ControllerStartup"
#: What ``ControllerStartup`` prints once its remoting server listens.
BOOTED = "The Controller Server boot success"
#: Where resolved classpaths are kept.
CACHE = Path(os.environ.get("ROCKETHA_CACHE", Path.home() / ".cache" / "rocketha")) / "controller"

#: A controller node is small: a few groups' metadata and a DLedger log of heartbeats.
JVM_FLAGS = [
    "-Xms64m",
    "-Xmx128m",
    "-XX:MaxDirectMemorySize=64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    # DLedger unmaps its log files through the JDK's internal cleaner (JDK 9+ encapsulation).
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
]

# RequestCode and ResponseCode values (rocketmq-remoting 5.x).
CONTROLLER_GET_METADATA_INFO = 1005
CONTROLLER_GET_SYNC_STATE_DATA = 1006

#: Waits for the controller: generous (JVMs start slowly on a busy 2-core machine); they only
#: turn a hang into an error that says what was missing.
WAIT = 120.0

T = TypeVar("T")


class ControllerUnavailable(RocketHAError):
    """The controller cannot run here (Java or Maven missing, the jars not resolvable); the
    message says what is missing and how to get it."""


def missing_tools() -> str | None:
    """Why the controller cannot run here (the tools missing from PATH), or None."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if not missing:
        return None
    return (
        f"Apache RocketMQ's controller needs {' and '.join(missing)} on PATH: Java 17 or newer "
        "runs it, Maven fetches its jars once (Debian/Ubuntu: apt-get install "
        "openjdk-17-jre-headless maven; elsewhere https://adoptium.net and "
        "https://maven.apache.org/install.html)"
    )


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.rocketha</groupId>
  <artifactId>rocketmq-controller-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-controller</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One resolution at a time across processes (tests in parallel, a demo beside them)."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def classpath(version: str = VERSION, cache: Path = CACHE) -> str:
    """The classpath of ``org.apache.rocketmq:rocketmq-controller:VERSION``: from the cache
    when every jar in it still exists, else resolved by Maven (minutes the first time, jars
    into ``~/.m2``). Raises :class:`ControllerUnavailable` without ``java`` or ``mvn``, or when
    Maven cannot resolve it."""
    why = missing_tools()
    if why:
        raise ControllerUnavailable(why)
    home = cache / version
    home.mkdir(parents=True, exist_ok=True)
    out = home / "classpath.txt"
    with _locked(home / ".lock"):
        if out.is_file():
            cp = out.read_text().strip()
            if cp and all(Path(jar).is_file() for jar in cp.split(os.pathsep)):
                return cp
        pom = home / "pom.xml"
        pom.write_text(_POM.format(version=version))
        command = ["mvn", "-q", "-B", "-f", str(pom), "dependency:build-classpath"]
        proc = _children.run(
            [*command, f"-Dmdep.outputFile={out}"], capture_output=True, text=True, timeout=900
        )
        if proc.returncode != 0 or not out.is_file():
            raise ControllerUnavailable(
                f"Maven could not resolve org.apache.rocketmq:rocketmq-controller:{version} "
                f"(is Maven Central reachable?): {(proc.stdout + proc.stderr)[-2000:]}"
            )
        return out.read_text().strip()


def until(probe: Callable[[], T | None], what: str, timeout: float = WAIT) -> T:
    """Polls ``probe`` until it returns something other than None or False; that value. A
    peer not reachable yet (``OSError``, or a remoting request that failed) counts as not yet."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = probe()
            if value is not None and value is not False:
                return value
        except (OSError, RemotingConnectError, SendStatusUnknownError) as e:
            last = e
        if time.monotonic() > deadline:
            raise RocketHAError(f"no {what} within {timeout:g} s (last error: {last!r})")
        time.sleep(0.02)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports the OS reports free on 127.0.0.1 now (a JVM binds them
    seconds later: :func:`start_controllers` retries if one was taken meanwhile)."""
    ports: set[int] = set()
    while len(ports) < count:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.add(probe.getsockname()[1])
    return sorted(ports)


class ControllerNode:
    """One ``ControllerStartup`` of a DLedger controller group, started (not yet ready: see
    :meth:`wait_ready`). ``peers``: every node's id to its port; this one is ``self_id``."""

    def __init__(
        self,
        cp: str,
        home: Path,
        self_id: str,
        peers: dict[str, int],
        group: str,
        jvm: Sequence[str] = JVM_FLAGS,
        host: str = "127.0.0.1",
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.home, self.port, self.host = home, peers[self_id], host
        keys = {
            "controllerDLegerGroup": group,
            "controllerDLegerPeers": ";".join(f"{i}-{host}:{p}" for i, p in peers.items()),
            "controllerDLegerSelfId": self_id,
            "controllerStorePath": home / "store",
            "configStorePath": home / "controller.properties",
            # The DLedger log's data files: 1 GiB each by default.
            "mappedFileSize": 4 << 20,
        }
        self.conf = home / "controller.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        self.stdout = home / "stdout.log"
        # A restart in the same home appends: only what this process printed counts.
        self._from = self.stdout.stat().st_size if self.stdout.exists() else 0
        command = [
            "java",
            *jvm,
            # ControllerStartup refuses to run without a RocketMQ home; its logs go under
            # ${user.home}/logs/rocketmqlogs.
            f"-Drocketmq.home.dir={home}",
            f"-Duser.home={home}",
            "-cp",
            cp,
            MAIN,
            "-c",
            str(self.conf),
        ]
        # `java` itself, not a script around it: the parent-death signal reaches the JVM.
        with self.stdout.open("ab") as out:
            self.proc = _children.spawn(
                command, cwd=home, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def output(self) -> str:
        """What this process printed (stdout and stderr)."""
        with contextlib.suppress(FileNotFoundError), self.stdout.open("rb") as f:
            f.seek(self._from)
            return f.read().decode(errors="replace")
        return ""

    def wait_ready(self, timeout: float = WAIT) -> None:
        """Until it printed :data:`BOOTED` and its port accepts connections; raises
        :class:`~rocketha.RocketHAError` with its output if it exits or takes longer."""
        deadline = time.monotonic() + timeout
        while not (BOOTED in self.output() and _port_open(self.port)):
            if self.proc.poll() is not None:
                raise RocketHAError(
                    f"controller {self.address} exited with {self.proc.returncode} before it "
                    f"was ready:\n{self.output()[-4000:]}"
                )
            if time.monotonic() > deadline:
                raise RocketHAError(
                    f"controller {self.address} not ready in {timeout:g} s:\n"
                    f"{self.output()[-4000:]}"
                )
            time.sleep(0.05)

    def kill(self) -> int:
        """SIGKILL (its DLedger store stays as the crash left it)."""
        return _children.kill(self.proc)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, SIGKILL after ``timeout``."""
        return _children.stop(self.proc, timeout)


@dataclass(frozen=True)
class Replica:
    """One broker of a group as the controller knows it: the id it gave the broker (not the
    brokerId the broker registers at the name server, which is 0 for the master)."""

    broker_id: int
    address: str
    alive: bool


@dataclass(frozen=True)
class GroupState:
    """A broker group in the controller leader's state machine (CONTROLLER_GET_SYNC_STATE_DATA)."""

    master_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync: tuple[Replica, ...]
    not_in_sync: tuple[Replica, ...]

    @property
    def sync_state_set(self) -> set[str]:
        """The addresses of the replicas in the SyncStateSet (the master's among them)."""
        return {r.address for r in self.in_sync}

    @property
    def replicas(self) -> tuple[Replica, ...]:
        return self.in_sync + self.not_in_sync


def _replicas(items: Sequence[dict[str, Any]]) -> tuple[Replica, ...]:
    return tuple(
        sorted(
            (Replica(int(r["brokerId"]), r["brokerAddress"], bool(r.get("alive"))) for r in items),
            key=lambda r: r.broker_id,
        )
    )


def _group_state(info: dict[str, Any]) -> GroupState:
    master_id = info.get("masterBrokerId")
    return GroupState(
        None if master_id is None or int(master_id) < 0 else int(master_id),
        info.get("masterAddress") or None,
        int(info.get("masterEpoch") or 0),
        int(info.get("syncStateSetEpoch") or 0),
        _replicas(info.get("inSyncReplicas") or []),
        _replicas(info.get("notInSyncReplicas") or []),
    )


def _call(
    api: _core.MQClientAPI, address: str, code: int, body: bytes = b""
) -> tuple[int, str, dict[str, str], bytes]:
    code, remark, ext, raw = api.invoke_admin(address, code, ext_fields={}, body=body, timeout=5.0)
    return code, remark or "", ext, raw


def _metadata(api: _core.MQClientAPI, address: str) -> dict[str, str]:
    code, remark, ext, _ = _call(api, address, CONTROLLER_GET_METADATA_INFO)
    if code != 0:
        raise RocketHAError(f"controller {address}: metadata answered {code} {remark}")
    return dict(ext)


def _serving_leader(api: _core.MQClientAPI, addresses: Sequence[str]) -> str | None:
    """The node of ``addresses`` that is leader and serves the controller's requests."""
    for address in addresses:
        try:
            if _metadata(api, address).get("isLeader") != "true":
                continue
            # DLedger makes a node leader before the controller's event scheduler runs
            # there; until then its requests answer CONTROLLER_NOT_LEADER.
            code = _call(api, address, CONTROLLER_GET_SYNC_STATE_DATA, b'["-"]')[0]
        except (RemotingConnectError, SendStatusUnknownError):
            continue  # not listening yet, or dying: the others may know the leader
        return address if code == 0 else None
    return None


def _sync_state(api: _core.MQClientAPI, leader: str, broker_name: str) -> GroupState | None:
    body = json.dumps([broker_name]).encode()
    code, remark, _, raw = _call(api, leader, CONTROLLER_GET_SYNC_STATE_DATA, body)
    if code != 0:
        raise RocketHAError(f"controller {leader}: sync state data: {code} {remark}")
    table = json.loads(_core.standard_json(raw)).get("replicasInfoTable") or {}
    return _group_state(table[broker_name]) if broker_name in table else None


def group_state(controller_addr: str, broker_name: str) -> GroupState | None:
    """The state of group ``broker_name`` at the leader of the controllers of
    ``controller_addr`` (a broker's ``controllerAddr``, ``;``-separated), running anywhere;
    None before a broker of the group registered. Raises :class:`~rocketha.RocketHAError` when
    no node answers as a serving leader."""
    api = _core.MQClientAPI()
    try:
        addresses = [a.strip() for a in controller_addr.split(";") if a.strip()]
        leader = _serving_leader(api, addresses)
        if leader is None:
            raise RocketHAError(f"no controller of {controller_addr} answers as the leader")
        return _sync_state(api, leader, broker_name)
    finally:
        api.close()


class Controllers:
    """A standalone DLedger controller of ``size`` nodes under ``root`` (``n0``, ``n1``, ...),
    started and ready (a leader that serves the controller's requests) when constructed; on
    failure, every node it started is stopped again. ``cp``: the controller's classpath
    (:func:`classpath`, or any that holds ``rocketmq-controller``). ``host``: the address of
    every node among the DLedger peers, so the one the controllers name as their leader to
    brokers (a broker in another network namespace reaches this host at another address than
    loopback). Start it through :func:`start_controllers` to retry on a port taken
    meanwhile."""

    def __init__(
        self,
        cp: str,
        root: Path,
        size: int = 3,
        *,
        group: str = "rocketha-controller",
        jvm: Sequence[str] = JVM_FLAGS,
        timeout: float = WAIT,
        host: str = "127.0.0.1",
    ) -> None:
        self.cp, self.root, self.group, self.jvm, self.host = cp, root, group, jvm, host
        self.ports = {f"n{i}": port for i, port in enumerate(free_ports(size))}
        self.nodes: list[ControllerNode | None] = [None] * size
        self._api = _core.MQClientAPI()
        try:
            for i in range(size):
                self.nodes[i] = self._spawn(i)
            for i in range(size):
                self._node(i).wait_ready(timeout)
            self.leader(timeout)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, index: int) -> ControllerNode:
        home = self.root / f"n{index}"
        return ControllerNode(
            self.cp, home, f"n{index}", self.ports, self.group, self.jvm, self.host
        )

    def _node(self, index: int) -> ControllerNode:
        node = self.nodes[index]
        if node is None:
            raise RocketHAError(f"controller n{index} is not running")
        return node

    @property
    def addresses(self) -> list[str]:
        """Every node's address, running or not, in node order."""
        return [f"{self.host}:{port}" for port in self.ports.values()]

    @property
    def controller_addr(self) -> str:
        """The brokers' ``controllerAddr``: every node, ``;``-separated."""
        return ";".join(self.addresses)

    def running(self) -> list[int]:
        """The indexes of the nodes running."""
        return [i for i, n in enumerate(self.nodes) if n is not None and n.proc.poll() is None]

    def kill(self, index: int) -> None:
        """SIGKILLs node ``index`` (its DLedger store stays for :meth:`restart`)."""
        self._node(index).kill()
        self.nodes[index] = None

    def restart(self, index: int, timeout: float = WAIT) -> None:
        """Starts node ``index`` again on its port and store, and waits until it booted."""
        if self.nodes[index] is not None:
            raise RocketHAError(f"controller n{index} is running")
        self.nodes[index] = node = self._spawn(index)
        node.wait_ready(timeout)

    def metadata(self, address: str) -> dict[str, str]:
        """CONTROLLER_GET_METADATA_INFO of one node: ``controllerLeaderAddress`` (once a leader
        is known), ``isLeader``, ``peers``, ``group``."""
        return _metadata(self._api, address)

    def _serving_leader(self) -> str | None:
        return _serving_leader(self._api, [self._node(i).address for i in self.running()])

    def leader(self, timeout: float = WAIT) -> str:
        """The address of the leader, once one serves the controller's requests."""
        return until(self._serving_leader, "controller leader", timeout)

    def group_state(self, broker_name: str) -> GroupState | None:
        """The state of group ``broker_name`` at the leader; None before a broker of it
        registered."""
        return _sync_state(self._api, self.leader(), broker_name)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to every node at once, SIGKILL to one still running after ``timeout``."""
        nodes = [n for n in self.nodes if n is not None]
        if nodes:
            with ThreadPoolExecutor(len(nodes)) as pool:
                list(pool.map(lambda n: n.stop(timeout), nodes))
        self.nodes = [None] * len(self.nodes)
        self._api.close()

    def __enter__(self) -> Controllers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_controllers(
    root: Path, size: int = 3, *, cp: str | None = None, attempts: int = 3, **kwargs: Any
) -> Controllers:
    """:class:`Controllers` on the classpath ``cp`` (default: :func:`classpath`, resolved
    with Maven on first use), started again on fresh ports if a port was taken between the
    probe and the JVM's bind; ``kwargs`` go to :class:`Controllers`."""
    cp = cp if cp is not None else classpath()
    for attempt in range(attempts):
        try:
            return Controllers(cp, root, size, **kwargs)
        except RocketHAError as e:
            if "Address already in use" not in str(e) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def describe(state: GroupState) -> str:
    """One line: the master and the SyncStateSet, as the controller has them."""
    in_sync = " ".join(f"{r.address} (id {r.broker_id})" for r in state.in_sync)
    out = " ".join(r.address for r in state.not_in_sync) or "none"
    return (
        f"master {state.master_address} (id {state.master_id}, epoch {state.master_epoch}); "
        f"SyncStateSet of {len(state.in_sync)}: {in_sync}; not in sync: {out}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rocketha.controllers``: prints the controller's classpath (resolved first if
    needed), for ``java -cp "$(python -m rocketha.controllers)" ...``; with ``--group NAME
    --controller-addr ADDRS``, that broker group's master and SyncStateSet at the controllers'
    leader instead."""
    parser = argparse.ArgumentParser(
        prog="python -m rocketha.controllers",
        description="Apache RocketMQ's controller for rocketha's controller mode: prints its "
        "classpath (resolved with Maven the first time), or a broker group's state at it",
    )
    parser.add_argument("--group", help="print this broker group's master and SyncStateSet")
    parser.add_argument("--controller-addr", help="the controllers, host:port;host:port;...")
    args = parser.parse_args(argv)
    if bool(args.group) != bool(args.controller_addr):
        parser.error("--group and --controller-addr go together")
    try:
        if args.group:
            state = group_state(args.controller_addr, args.group)
            print(describe(state) if state else f"no broker of {args.group} registered yet")
        else:
            print(classpath())
    except RocketHAError as e:
        print(f"rocketha.controllers: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "BOOTED",
    "CACHE",
    "JVM_FLAGS",
    "MAIN",
    "VERSION",
    "ControllerNode",
    "ControllerUnavailable",
    "Controllers",
    "GroupState",
    "Replica",
    "classpath",
    "describe",
    "free_ports",
    "group_state",
    "missing_tools",
    "start_controllers",
    "until",
]

if __name__ == "__main__":
    sys.exit(main())
