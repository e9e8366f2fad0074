"""Apache RocketMQ 5.x in controller mode (automatic failover) as real processes on 127.0.0.1.

A standalone DLedger controller of three nodes (the package's :mod:`rocketha.controllers`, on
the pinned RocketMQ's classpath), brokers of one group in controller mode registered at a name
server (``rocketmq.py``'s), the group's state as the controller leader sees it, and a Java
producer that goes on sending while brokers die (``Peer stream``). Benches and the interop
tests share it.

>>> rmq = RocketMQ.resolve(VERSION_5)
>>> with start_controllers(rmq, tmp / "ctl") as ctl, rmq.namesrv(tmp / "ns") as ns:
...     with BrokerGroup(rmq, tmp / "g", ctl, ns) as group:
...         state = group.wait_formed()  # a master, the others in its SyncStateSet
...         group.kill(group.master_index(state))

Like the rest of the harness: ports picked free at start, homes under the given directory, the
small JVMs of ``JVM_FLAGS``, readiness waited for (a log line and an accepting port, then the
controller's own answers), every process stopped when its ``with`` block ends.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from rocketha import _children
from rocketha.controllers import WAIT, Controllers, GroupState, Replica, until
from rocketha.controllers import start_controllers as _start_controllers

from benches.peers import wire
from benches.peers.rocketmq import (
    JVM_FLAGS,
    JavaBroker,
    PeerProcess,
    RocketMQ,
)

# RequestCode values (rocketmq-remoting 5.x).
UPDATE_AND_CREATE_TOPIC = 17
GET_MAX_OFFSET = 30
GET_ROUTEINFO_BY_TOPIC = 105


# -- the controller ----------------------------------------------------------------------------


def start_controllers(rmq: RocketMQ, root: Path, size: int = 3, **kwargs: Any) -> Controllers:
    """:func:`rocketha.controllers.start_controllers` on ``rmq``'s classpath (the harness's
    pinned RocketMQ, which holds ``rocketmq-controller``): ready, retried on fresh ports if one
    was taken before the JVM bound it."""
    kwargs.setdefault("group", "interop-controller")
    return _start_controllers(root, size, cp=rmq.classpath, **kwargs)


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
T = TypeVar("T")


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
