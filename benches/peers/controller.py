"""Apache RocketMQ 5.x in controller mode (automatic failover) as real processes on 127.0.0.1.

A standalone DLedger controller of three nodes (``ControllerStartup -c``), brokers of one
group in controller mode registered at a name server (``rocketmq.py``'s), the group's state as
the controller leader sees it, and a Java producer that goes on sending while brokers die
(``Peer stream``). Benches and the interop tests share it.

>>> rmq = RocketMQ.resolve(VERSION_5)
>>> with Controllers(rmq, tmp / "ctl") as ctl, rmq.namesrv(tmp / "ns") as ns:
...     with BrokerGroup(rmq, tmp / "g", ctl, ns) as group:
...         state = group.wait_formed()  # a master, the others in its SyncStateSet
...         group.kill(group.master_index(state))

Like the rest of the harness: ports picked free at start, homes under the given directory, the
small JVMs of ``JVM_FLAGS``, readiness waited for (a log line and an accepting port, then the
controller's own answers), every process stopped when its ``with`` block ends.

Why DLedger, RocketMQ's default ``controllerType``: its remoting server is the DLedger peer
port itself (one port a node, what brokers list in ``controllerAddr``), and a broker's
heartbeat is a plain request. The jRaft controller takes a second port a node and puts every
broker heartbeat through its Raft log, which costs a 2-core machine for nothing here.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from rocketha import _children

from benches.peers import wire
from benches.peers.rocketmq import (
    JVM_FLAGS,
    JavaBroker,
    JavaProcess,
    PeerProcess,
    RocketMQ,
    free_ports,
    retry_ports,
)

CONTROLLER_MAIN = "org.apache.rocketmq.controller.ControllerStartup"
#: What ``ControllerStartup`` prints once its remoting server listens.
CONTROLLER_BOOTED = "The Controller Server boot success"

# RequestCode and ResponseCode values (rocketmq-remoting 5.x).
UPDATE_AND_CREATE_TOPIC = 17
GET_MAX_OFFSET = 30
GET_ROUTEINFO_BY_TOPIC = 105
CONTROLLER_GET_METADATA_INFO = 1005
CONTROLLER_GET_SYNC_STATE_DATA = 1006
CONTROLLER_NOT_LEADER = 2007

#: Harness waits: generous, they only turn a hang into an error that says what was missing.
WAIT = 120.0

T = TypeVar("T")


def until(probe: Callable[[], T | None], what: str, timeout: float = WAIT) -> T:
    """Polls ``probe`` until it returns something other than None or False; that value.
    ``OSError`` from a probe (a peer not listening yet, or just killed) counts as not yet."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = probe()
            if value is not None and value is not False:
                return value
        except OSError as e:
            last = e
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {timeout:g} s (last error: {last!r})")
        time.sleep(0.02)


# -- the controller ----------------------------------------------------------------------------


class ControllerNode(JavaProcess):
    """One ``ControllerStartup`` of a DLedger controller group; its port is its DLedger peer
    port and its controller port at once. Started, not yet waited for."""

    kind = "controller"

    def __init__(
        self,
        rmq: RocketMQ,
        home: Path,
        self_id: str,
        peers: dict[str, int],
        group: str,
        jvm: Sequence[str] = JVM_FLAGS,
    ) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.port = peers[self_id]
        keys = {
            "controllerDLegerGroup": group,
            "controllerDLegerPeers": ";".join(f"{i}-127.0.0.1:{p}" for i, p in peers.items()),
            "controllerDLegerSelfId": self_id,
            "controllerStorePath": home / "store",
            "configStorePath": home / "controller.properties",
            "rocketmqHome": home,
            # The DLedger log's data files: 1 GiB each by default.
            "mappedFileSize": 4 << 20,
        }
        conf = home / "controller.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        super().__init__(rmq.classpath, home, CONTROLLER_MAIN, ["-c", str(conf)], jvm)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


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


class Controllers:
    """A standalone DLedger controller of ``size`` nodes (3: a quorum survives one loss),
    started and ready (a leader that serves the controller's requests) when constructed.
    Start it through :func:`start_controllers` to retry on a port taken meanwhile."""

    def __init__(
        self,
        rmq: RocketMQ,
        root: Path,
        size: int = 3,
        *,
        group: str = "interop-controller",
        jvm: Sequence[str] = JVM_FLAGS,
    ) -> None:
        self.rmq, self.root, self.group, self.jvm = rmq, root, group, jvm
        ports: set[int] = set()
        while len(ports) < size:
            ports.add(free_ports(1))
        self.ports = {f"n{i}": port for i, port in enumerate(sorted(ports))}
        self.nodes: list[ControllerNode | None] = [None] * size
        try:
            for i in range(size):
                self.nodes[i] = self._spawn(i)
            for i in range(size):
                self._node(i).wait_ready(self.ports[f"n{i}"], CONTROLLER_BOOTED)
            self.leader()
        except BaseException:
            self.stop()
            raise

    def _spawn(self, index: int) -> ControllerNode:
        home = self.root / f"n{index}"
        return ControllerNode(self.rmq, home, f"n{index}", self.ports, self.group, self.jvm)

    def _node(self, index: int) -> ControllerNode:
        node = self.nodes[index]
        if node is None:
            raise RuntimeError(f"controller n{index} is not running")
        return node

    @property
    def addresses(self) -> list[str]:
        """Every node's address, running or not, in node order."""
        return [f"127.0.0.1:{port}" for port in self.ports.values()]

    @property
    def controller_addr(self) -> str:
        """The brokers' ``controllerAddr``."""
        return ";".join(self.addresses)

    def running(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n is not None and n.proc.poll() is None]

    def kill(self, index: int) -> None:
        """SIGKILLs node ``index`` (its DLedger store stays for :meth:`restart`)."""
        self._node(index).kill()
        self.nodes[index] = None

    def restart(self, index: int) -> None:
        """Starts node ``index`` again on its port and store, and waits until it booted."""
        if self.nodes[index] is not None:
            raise RuntimeError(f"controller n{index} is running")
        self.nodes[index] = node = self._spawn(index)
        node.wait_ready(node.port, CONTROLLER_BOOTED)

    def metadata(self, address: str) -> dict[str, str]:
        """CONTROLLER_GET_METADATA_INFO of one node: ``controllerLeaderAddress`` (once a leader
        is known), ``isLeader``, ``peers``, ``group``."""
        response = wire.call(address, CONTROLLER_GET_METADATA_INFO)
        if response.code != wire.SUCCESS:
            raise RuntimeError(f"{address}: metadata answered {response.code} {response.remark}")
        return response.ext

    def _serving_leader(self) -> str | None:
        for index in self.running():
            address = self._node(index).address
            try:
                if self.metadata(address).get("isLeader") != "true":
                    continue
                # DLedger makes a node leader before the controller's event scheduler runs
                # there; until then its requests answer CONTROLLER_NOT_LEADER.
                probe = wire.call(address, CONTROLLER_GET_SYNC_STATE_DATA, body=b'["-"]')
            except OSError:
                continue  # not listening yet, or dying: the others may know the leader
            return address if probe.code == wire.SUCCESS else None
        return None

    def leader(self, timeout: float = WAIT) -> str:
        """The address of the leader, once one serves the controller's requests."""
        return until(self._serving_leader, "controller leader", timeout)

    def group_state(self, broker_name: str) -> GroupState | None:
        """The state of group ``broker_name`` at the leader; None before a broker of it
        registered."""
        leader = self.leader()
        body = json.dumps([broker_name]).encode()
        response = wire.call(leader, CONTROLLER_GET_SYNC_STATE_DATA, body=body)
        if response.code != wire.SUCCESS:
            raise RuntimeError(f"sync state data: {response.code} {response.remark}")
        table = response.json().get("replicasInfoTable") or {}
        return _group_state(table[broker_name]) if broker_name in table else None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to every node at once, SIGKILL to one still running after ``timeout``."""
        _stop_all([n for n in self.nodes if n is not None], timeout)
        self.nodes = [None] * len(self.nodes)

    def __enter__(self) -> Controllers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_controllers(rmq: RocketMQ, root: Path, size: int = 3, **kwargs: Any) -> Controllers:
    """:class:`Controllers`, started again on fresh ports if one was taken before the JVM
    bound it."""
    return retry_ports(lambda: Controllers(rmq, root, size, **kwargs))  # type: ignore[no-any-return]


class Stoppable(Protocol):
    def stop(self, timeout: float = ...) -> int: ...


def _stop_all(procs: Sequence[Stoppable], timeout: float) -> None:
    if procs:
        with ThreadPoolExecutor(len(procs)) as pool:
            list(pool.map(lambda p: p.stop(timeout), procs))


# -- brokers in controller mode ----------------------------------------------------------------


#: broker.conf keys of a broker in controller mode. The controller gives each broker its id
#: (brokerId -1: ask for one) and its role: every broker starts as a SLAVE and the first to
#: ask is elected master. allAckInSyncStateSet: a SYNC_MASTER answers SEND_OK once every
#: replica in the SyncStateSet has the message, so no acknowledged message is lost when the
#: controller elects a new master from that set.
CONTROLLER_MODE = {
    "enableControllerMode": "true",
    "brokerId": -1,
    "brokerRole": "SLAVE",
    "allAckInSyncStateSet": "true",
}
#: Not RocketMQ's defaults, for a 2-core machine: 5.x's timer wheel (messages with a delivery
#: time) flushes its 38.7 MB wheel every second (TimerFlushService): a third of a core per idle
#: broker.
QUIET = {"timerWheelEnable": "false"}


class GroupBroker(Stoppable, Protocol):
    """One broker process of a :class:`BrokerGroup`: a :class:`~benches.peers.rocketmq.
    JavaBroker`, or another system's broker in the same controller mode."""

    @property
    def address(self) -> str: ...

    #: Its ``storePathRootDir``.
    store: Path

    def kill(self) -> int: ...


class Addressed(Protocol):
    """A name server, whichever system's."""

    @property
    def address(self) -> str: ...


B = TypeVar("B", bound=GroupBroker)


class ControllerModeGroup(Generic[B]):
    """``size`` brokers of group ``broker_name`` in controller mode at ``controllers``,
    registered at ``namesrv``, each started (booted; not yet formed: see :meth:`wait_formed`)
    when constructed. ``conf``: more broker.conf keys, for every broker. A subclass starts
    one system's brokers (:meth:`spawn`): :class:`BrokerGroup` Apache RocketMQ's."""

    def __init__(
        self,
        root: Path,
        controllers: Controllers,
        namesrv: Addressed,
        size: int = 3,
        *,
        broker_name: str = "ctl-a",
        cluster: str = "ControllerCluster",
        **conf: Any,
    ) -> None:
        self.root, self.controllers, self.namesrv = root, controllers, namesrv
        self.broker_name = broker_name
        self.conf = {
            "brokerClusterName": cluster,
            "brokerName": broker_name,
            "controllerAddr": controllers.controller_addr,
            "namesrvAddr": namesrv.address,
            **CONTROLLER_MODE,
            **conf,
        }
        self.brokers: list[B | None] = [None] * size
        try:
            with ThreadPoolExecutor(size) as pool:
                list(pool.map(self.start, range(size)))
        except BaseException:
            self.stop()
            raise

    def spawn(self, index: int) -> B:
        """Starts broker ``index`` under ``root / b{index}`` with :attr:`conf` and waits until
        it booted."""
        raise NotImplementedError

    def start(self, index: int) -> B:
        """Starts broker ``index`` (again: on its store, on new ports) and waits until it
        booted."""
        if self.brokers[index] is not None:
            raise RuntimeError(f"broker {index} is running")
        broker = self.spawn(index)
        self.brokers[index] = broker
        return broker

    def broker(self, index: int) -> B:
        broker = self.brokers[index]
        if broker is None:
            raise RuntimeError(f"broker {index} is not running")
        return broker

    def running(self) -> list[int]:
        return [i for i, b in enumerate(self.brokers) if b is not None]

    def addresses(self) -> dict[str, int]:
        """The running brokers' addresses, to their index."""
        return {self.broker(i).address: i for i in self.running()}

    def kill(self, index: int) -> None:
        """SIGKILLs broker ``index``: no shutdown hook, its store as the crash left it."""
        self.broker(index).kill()
        self.brokers[index] = None

    def state(self) -> GroupState | None:
        return self.controllers.group_state(self.broker_name)

    def master_index(self, state: GroupState | None = None) -> int | None:
        """The running broker the controller has as master, if any."""
        state = state or self.state()
        return self.addresses().get(state.master_address or "") if state else None

    def _formed(self) -> GroupState | None:
        state = self.state()
        running = set(self.addresses())
        if state is None or state.master_address not in running:
            return None
        if state.sync_state_set != running or not all(r.alive for r in state.in_sync):
            return None
        return state

    def wait_formed(self, timeout: float = WAIT) -> GroupState:
        """Until one running broker is master and every running broker is in its SyncStateSet,
        alive; that state."""
        return until(self._formed, f"group {self.broker_name} formed", timeout)

    def wait_new_master(self, old: str, timeout: float = WAIT) -> GroupState:
        """Until the controller has a master other than ``old`` (an address) that runs."""

        def elected() -> GroupState | None:
            state = self.state()
            if state and state.master_address != old and self.master_index(state) is not None:
                return state
            return None

        return until(elected, f"a master of {self.broker_name} other than {old}", timeout)

    def route(self, topic: str) -> dict[int, str]:
        """The name server's route of ``topic`` for this group: broker id (0: master) to
        address; empty while it has none."""
        return route(self.namesrv.address, topic, self.broker_name)

    def wait_routed(self, topic: str, timeout: float = WAIT) -> dict[int, str]:
        """Until the name server routes ``topic`` to this group's master (brokerId 0, the
        controller's master) and to every running broker."""
        state = self.wait_formed(timeout)

        def routed() -> dict[int, str] | None:
            addrs = self.route(topic)
            everyone = set(addrs.values()) == set(self.addresses())
            return addrs if everyone and addrs.get(0) == state.master_address else None

        return until(routed, f"route of {topic} to every broker of {self.broker_name}", timeout)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Creates ``topic`` on every running broker (UPDATE_AND_CREATE_TOPIC), slaves
        included: a slave copies the master's topics only every 10 s, and one elected before
        that would not know the topic."""
        for address in self.addresses():
            create_topic(address, topic, queues)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to every broker at once, SIGKILL to one still running after ``timeout``."""
        _stop_all([b for b in self.brokers if b is not None], timeout)
        self.brokers = [None] * len(self.brokers)

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BrokerGroup(ControllerModeGroup[JavaBroker]):
    """Apache RocketMQ's brokers in a :class:`ControllerModeGroup`, on ``jvm`` flags, quiet
    (:data:`QUIET`)."""

    def __init__(
        self,
        rmq: RocketMQ,
        root: Path,
        controllers: Controllers,
        namesrv: Addressed,
        size: int = 3,
        *,
        jvm: Sequence[str] = JVM_FLAGS,
        **conf: Any,
    ) -> None:
        self.rmq, self.jvm = rmq, jvm
        super().__init__(root, controllers, namesrv, size, **{**QUIET, **conf})

    def spawn(self, index: int) -> JavaBroker:
        broker: JavaBroker = self.rmq.broker(self.root / f"b{index}", jvm=self.jvm, **self.conf)
        return broker


# -- requests to brokers and the name server ---------------------------------------------------


def create_topic(broker: str, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC at one broker: ``queues`` read and write queues, read-write."""
    ext = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    response = wire.call(broker, UPDATE_AND_CREATE_TOPIC, ext, timeout=30)
    if response.code != wire.SUCCESS:
        raise RuntimeError(f"{broker}: create {topic}: {response.code} {response.remark}")


def route(namesrv: str, topic: str, broker_name: str) -> dict[int, str]:
    """GET_ROUTEINFO_BY_TOPIC: broker id to address, of ``broker_name``'s entry."""
    response = wire.call(namesrv, GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if response.code != wire.SUCCESS:
        return {}
    for data in response.json().get("brokerDatas") or []:
        if data.get("brokerName") == broker_name:
            return {int(k): v for k, v in (data.get("brokerAddrs") or {}).items()}
    return {}


def max_offset(broker: str, topic: str, queue_id: int) -> int:
    """GET_MAX_OFFSET: the next offset of one queue at ``broker``."""
    response = wire.call(broker, GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    if response.code != wire.SUCCESS:
        raise RuntimeError(f"{broker}: max offset of {topic}/{queue_id}: {response.remark}")
    return int(response.ext["offset"])


def store_host(offset_msg_id: str) -> str:
    """The address of the broker that stored a message, from its offset message id (IPv4
    store host, 4 bytes; port, 4; commit log offset, 8)."""
    raw = bytes.fromhex(offset_msg_id[:16])
    return f"{socket.inet_ntoa(raw[:4])}:{struct.unpack('>i', raw[4:])[0]}"


# -- a producer that goes on through failovers -------------------------------------------------


@dataclass(frozen=True)
class Ack:
    """A send of ``Peer stream`` that returned a SendResult."""

    seq: int
    status: str
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    #: Epoch seconds the send returned.
    at: float

    @property
    def ok(self) -> bool:
        return self.status == "SEND_OK"

    @property
    def stored_by(self) -> str:
        return store_host(self.offset_msg_id)


@dataclass(frozen=True)
class Failure:
    """A send of ``Peer stream`` that threw."""

    seq: int
    at: float
    error: str


def _stream_line(line: str) -> Ack | Failure | None:
    f = line.split(" ")
    if f[0] == "ACKED":
        return Ack(int(f[1]), f[2], f[3], f[4], int(f[5]), int(f[6]), int(f[7]) / 1e6)
    if f[0] == "FAILED":
        return Failure(int(f[1]), int(f[2]) / 1e6, " ".join(f[3:]))
    return None


class Streamer(PeerProcess):
    """A running ``Peer stream`` (:func:`stream`): what it printed so far is in :attr:`lines`,
    parsed by :attr:`acks` and :attr:`failures`."""

    def __init__(self, command: list[str], home: Path, prefix: str) -> None:
        super().__init__(command, home, "stream")
        self.prefix = prefix
        # Parsed as they come: a bench's producer prints tens of thousands of lines, and the
        # waits below look at them every few milliseconds.
        self._events: list[Ack | Failure] = []
        self._parsed_lines = 0

    def body(self, seq: int) -> bytes:
        return f"{self.prefix}-{seq}".encode()

    def _parsed(self) -> list[Ack | Failure]:
        new = self.lines[self._parsed_lines : len(self.lines)]
        self._parsed_lines += len(new)
        self._events += [e for e in map(_stream_line, new) if e is not None]
        return self._events

    @property
    def acks(self) -> list[Ack]:
        return [e for e in self._parsed() if isinstance(e, Ack)]

    @property
    def failures(self) -> list[Failure]:
        return [e for e in self._parsed() if isinstance(e, Failure)]

    def _check_running(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"Peer stream exited {self.proc.returncode}: {self.lines[-20:]}")

    def wait_acked(
        self, count: int, after: float = 0.0, by: str | None = None, timeout: float = WAIT
    ) -> list[Ack]:
        """Until ``count`` sends returned SEND_OK after epoch second ``after`` (stored by the
        broker at ``by``, if given); those."""

        def acked() -> list[Ack] | None:
            self._check_running()
            ok = [a for a in self.acks if a.ok and a.at > after and by in (None, a.stored_by)]
            return ok if len(ok) >= count else None

        stored = f" stored by {by}" if by else ""
        return until(acked, f"{count} SEND_OK{stored} from Peer stream", timeout)

    def stop(self, timeout: float = 60.0) -> None:
        """Closes its input: it finishes the send under way, shuts down and exits."""
        super().stop(timeout)

    def __enter__(self) -> Streamer:
        return self

    def __exit__(self, *exc: object) -> None:
        _children.kill(self.proc)


def stream(
    rmq: RocketMQ,
    namesrv: str,
    topic: str,
    *,
    home: Path,
    prefix: str = "s",
    group: str = "interop-stream",
    pause_ms: int = 10,
    route_poll_ms: int = 1000,
) -> Streamer:
    """A ``DefaultMQProducer`` sending ``topic`` messages (bodies ``{prefix}-{seq}``) one at a
    time, ``pause_ms`` apart, without retries, its routes refreshed every ``route_poll_ms``
    (RocketMQ's default is 30 s), until :meth:`Streamer.stop`; it has started sending once
    :meth:`Streamer.wait_acked` sees its first acks."""
    args = ["stream", namesrv, "-", topic, group, prefix, str(pause_ms), str(route_poll_ms)]
    return Streamer(rmq._peer_command(home, args), home, prefix)


__all__ = [
    "CONTROLLER_MODE",
    "QUIET",
    "Ack",
    "BrokerGroup",
    "ControllerModeGroup",
    "ControllerNode",
    "Controllers",
    "Failure",
    "GroupBroker",
    "GroupState",
    "Replica",
    "Streamer",
    "create_topic",
    "max_offset",
    "route",
    "start_controllers",
    "store_host",
    "stream",
    "until",
]
