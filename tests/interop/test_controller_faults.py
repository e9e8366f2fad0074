"""Faults of rocketha brokers in controller mode (issue 29) under Apache RocketMQ 5.4.0's
controller of three nodes: the controllers' leader killed, then the brokers' master; and a
network partition that isolates the master, alive, from the controllers and its slaves.

A group of three ``rocketha broker`` processes takes SYNC sends from rocketha's producer; with
``allAckInSyncStateSet=true`` a put is acknowledged once every member of the SyncStateSet holds
it.

* The controllers' leader is SIGKILLed, then the brokers' master: the two controllers left
  elect another member of the SyncStateSet, sends go on there, no acknowledged message is lost,
  and the killed broker, restarted, rejoins as a slave and catches up.
* The master's broker runs in a network namespace of the test's, joined to the host by a veth
  pair; taking the host's end down cuts it from everything else (the controllers, its slaves,
  the name server) while it runs on. Sends made to it inside its namespace are never
  acknowledged: it can neither get its slaves' acks nor shrink the SyncStateSet without the
  controller, which elects another member once the master's heartbeats stop. Healed, the old
  master follows the new one, its unacknowledged tail cut, and holds the new master's log; a
  consumer reads every acknowledged message across the switch.

The harness is ``benches/peers/controller.py``. Run: ``pytest -m interop``.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import (
    SEGMENT,
    BrokerProcess,
    create_topic,
    runtime_info,
    spawn_rocketha_namesrv,
    wait_for,
    write_conf,
)
from rocketha import (
    ConsumeFromWhere,
    Message,
    MessageStore,
    MQClientError,
    Producer,
    PullConsumer,
    SendStatus,
    SendStatusUnknownError,
)

from benches.peers import wire
from benches.peers.controller import Controllers, GroupState, start_controllers
from benches.peers.rocketmq import VERSION_5, RocketMQ, Unavailable

pytestmark = pytest.mark.interop

GROUP = "rocha-faults"
TOPIC = "CtlFaults"
QUEUES = 4
#: SEND_OK the producer gets before a fault, and from the new master after it.
STEADY = 50
#: Generous: only turns a hang into an error that says what was missing.
WAIT = 120.0
SEND_MESSAGE = 10
GET_MAX_OFFSET = 30

T = TypeVar("T")


def member_conf(
    path: Path, controllers: Controllers, namesrv: str, host: str = "127.0.0.1"
) -> Path:
    """broker.conf of one member of the group, serving on ``host`` (HA port included)."""
    lan = (
        {} if host == "127.0.0.1" else {"remotingAllowInsecure": "true", "haAllowInsecure": "true"}
    )
    return write_conf(
        path,
        enableControllerMode="true",
        controllerAddr=controllers.controller_addr,
        namesrvAddr=namesrv,
        brokerClusterName="RochaCluster",
        brokerName=GROUP,
        brokerRole="SLAVE",
        brokerId=-1,
        allAckInSyncStateSet="true",
        # Half RocketMQ's 10 s: the partition's election comes sooner.
        controllerHeartBeatTimeoutMills=5000,
        storePathRootDir=path.with_suffix(""),
        mappedFileSizeCommitLog=SEGMENT,
        listenAddress=host,
        brokerIP1=host,
        listenPort=0,
        haListenAddress=host,
        haListenPort=0,
        registerNameServerPeriod=500,
        slaveTimeout=3000,
        **lan,
    )


def address(proc: BrokerProcess) -> str:
    return str(proc.started["listen_address"])


def state(controllers: Controllers) -> GroupState | None:
    return controllers.group_state(GROUP)


def formed(controllers: Controllers, members: set[str]) -> GroupState:
    """Until a master and every one of ``members`` (addresses) in its SyncStateSet."""

    def check() -> GroupState | None:
        s = state(controllers)
        ok = s is not None and s.master_address in members and s.sync_state_set == members
        return s if ok else None

    return wait_for(check, WAIT, f"the SyncStateSet {sorted(members)}")


def new_master(controllers: Controllers, old: str) -> GroupState:
    def check() -> GroupState | None:
        s = state(controllers)
        return s if s and s.master_address not in (None, old) else None

    return wait_for(check, WAIT, f"a master other than {old}")


def send_until(producer: Producer, prefix: str, count: int, acked: set[bytes]) -> None:
    """Sends until ``count`` more sends were SEND_OK (a send that fails or gets no answer, as
    while the group has no master reachable, is tried again under the next number); adds
    their bodies."""
    ok, seq = 0, 0

    def one() -> bool:
        nonlocal ok, seq
        body = f"{prefix}-{seq}".encode()
        seq += 1
        try:
            result = producer.send(Message(TOPIC, body))
        except (MQClientError, SendStatusUnknownError):
            return False
        if result.status == SendStatus.SEND_OK:
            acked.add(body)
            ok += 1
        return ok >= count

    wait_for(one, WAIT, f"{count} SEND_OK of {prefix}")


def stored(store: Path) -> list[tuple[int, bytes]]:
    """(commit log offset, body) of every message of a stopped broker's store."""
    with MessageStore(store, mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        return [(m.commitlog_offset, m.body) for m in s.messages()]


def create_everywhere(procs: dict[str, BrokerProcess]) -> None:
    """The topic on every member: a slave elected before it copied its master's topics would
    not know it."""
    for addr in procs:
        create_topic(addr, TOPIC, QUEUES)


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Namespace:
    """A network namespace of the test's, joined to the host by a veth pair: the host's end
    has :attr:`host_ip`, the namespace's :attr:`ns_ip`, a /30 of 198.18.0.0/15 (the range
    RFC 2544 keeps for tests) picked from the pid, as the names are, so that two sessions on
    one machine do not collide. :meth:`cut` takes the host's end down: what runs inside loses
    everything outside (its packets go nowhere, as in a partition) and runs on."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.name = f"rhcf{pid}"
        self.host_link, ns_link = f"{self.name}h", f"{self.name}n"
        net = f"198.{18 + (pid >> 14 & 1)}.{pid >> 6 & 255}"
        self.host_ip, self.ns_ip = f"{net}.{(pid & 63) * 4 + 1}", f"{net}.{(pid & 63) * 4 + 2}"
        self.close()  # what a session of the same pid, killed, may have left
        try:
            _ip("netns", "add", self.name)
            _ip("link", "add", self.host_link, "type", "veth", "peer", "name", ns_link)
            _ip("link", "set", ns_link, "netns", self.name)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_link)
            _ip("link", "set", self.host_link, "up")
            _ip("-n", self.name, "addr", "add", f"{self.ns_ip}/30", "dev", ns_link)
            _ip("-n", self.name, "link", "set", ns_link, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as e:
            self.close()
            raise RuntimeError(f"{' '.join(e.cmd)}: {e.stderr.strip()}") from None

    @property
    def exec(self) -> tuple[str, ...]:
        """The command prefix that runs a program inside (``ip`` execs it: same pid)."""
        return ("ip", "netns", "exec", self.name)

    def cut(self) -> None:
        _ip("link", "set", self.host_link, "down")

    def heal(self) -> None:
        _ip("link", "set", self.host_link, "up")

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a thread that entered the namespace (``setns`` moves one thread only):
        the sockets it opens are inside."""
        out: list[T] = []
        error: list[BaseException] = []

        def run() -> None:
            try:
                with open(f"/run/netns/{self.name}") as f:
                    if _libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), f"setns {self.name}")
                out.append(fn())
            except BaseException as e:  # handed to the caller's thread
                error.append(e)

        thread = threading.Thread(target=run, name=f"in-{self.name}")
        thread.start()
        thread.join()
        if error:
            raise error[0]
        return out[0]

    def close(self) -> None:
        for args in (("netns", "del", self.name), ("link", "del", self.host_link)):
            subprocess.run(["ip", *args], capture_output=True)


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    if os.geteuid() != 0:
        pytest.skip("the partition needs a network namespace and a veth pair: root")
    ns = Namespace()
    try:
        yield ns
    finally:
        ns.close()


def queue_end(broker: str) -> int:
    """GET_MAX_OFFSET of the queue :func:`send_direct` sends to: where a consumer of
    ``broker`` reads up to there."""
    ext = {"topic": TOPIC, "queueId": 0}
    return int(wire.call(broker, GET_MAX_OFFSET, ext, timeout=30).ext["offset"])


def send_direct(broker: str, body: bytes) -> int | None:
    """SEND_MESSAGE to ``broker`` itself, no name server or retry: its answer's code, or
    None if none came."""
    ext = {
        "producerGroup": "faults-direct",
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": QUEUES,
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": int(time.time() * 1000),
        "flag": 0,
        "properties": "",
        "reconsumeTimes": 0,
        "unitMode": False,
        "batch": False,
    }
    try:
        return int(wire.call(broker, SEND_MESSAGE, ext, body, timeout=30).code)
    except OSError:
        return None


@pytest.fixture
def rmq() -> RocketMQ:
    try:
        return RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))


class Brokers:
    """The members' processes by address, every one killed at the end."""

    def __init__(self) -> None:
        self.procs: dict[str, BrokerProcess] = {}

    def start(self, conf: Path, prefix: tuple[str, ...] = ()) -> BrokerProcess:
        proc = BrokerProcess(conf, prefix=prefix)
        self.procs[address(proc)] = proc
        return proc

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop()
        self.procs.clear()

    def kill_all(self) -> None:
        for proc in self.procs.values():
            proc.kill()
        self.procs.clear()


@pytest.fixture
def brokers() -> Iterator[Brokers]:
    group = Brokers()
    try:
        yield group
    finally:
        group.kill_all()


def test_controller_leader_then_master_killed(
    rmq: RocketMQ, workdir: Path, brokers: Brokers
) -> None:
    with (
        start_controllers(rmq, workdir / "ctl") as controllers,
        spawn_rocketha_namesrv(workdir / "namesrv.log") as ns,
    ):
        confs = {
            name: member_conf(workdir / f"{name}.conf", controllers, ns.address) for name in "abc"
        }
        names = {address(brokers.start(conf)): name for name, conf in confs.items()}
        first = formed(controllers, set(brokers.procs))
        master = first.master_address
        assert master is not None
        create_everywhere(brokers.procs)
        acked: set[bytes] = set()
        with Producer(ns.address, "faults-producer") as producer:
            send_until(producer, "before", STEADY, acked)

            # A quorum of two controllers is left; it keeps the group as it was.
            leader = controllers.leader()
            controllers.kill(controllers.addresses.index(leader))
            assert controllers.leader() != leader
            kept = formed(controllers, set(brokers.procs))
            # The same master. Its epoch may have moved on: on a loaded machine the new leader
            # can find its heartbeat older than controllerHeartBeatTimeoutMills (5 s here), drop
            # it, and elect it again, the only member with every acknowledged message.
            assert kept.master_address == master, kept
            assert kept.master_epoch >= first.master_epoch, kept

            brokers.procs.pop(master).kill()
            elected = new_master(controllers, master)
            assert elected.master_address in kept.sync_state_set - {master}, elected
            assert elected.master_epoch > kept.master_epoch
            send_until(producer, "after", STEADY, acked)

            # The killed broker comes back as a slave of the new master and catches up (its
            # ack reaches the master's end: the master takes it into the SyncStateSet).
            back = brokers.start(confs[names[master]])
            assert back.started["role"] == "SLAVE", back.started
            rejoined = formed(controllers, set(brokers.procs))
            assert rejoined.master_address == elected.master_address, rejoined
            send_until(producer, "rejoined", STEADY, acked)
        brokers.stop_all()

    assert elected.master_address is not None
    new = names[elected.master_address]
    logs = {n: stored(confs[n].with_suffix("")) for n in "abc"}
    lost = acked - {body for _, body in logs[new]}
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost: {sorted(lost)[:5]}"
    # The restarted broker holds the new master's log, message for message and offset for
    # offset: what it had past their common history (a send it took as it died) is gone.
    assert logs[names[master]] == logs[new]


def test_partition_isolating_the_master(
    rmq: RocketMQ, workdir: Path, namespace: Namespace, brokers: Brokers
) -> None:
    host, inside = namespace.host_ip, namespace.ns_ip
    with (
        start_controllers(rmq, workdir / "ctl", host=host) as controllers,
        spawn_rocketha_namesrv(
            workdir / "namesrv.log", "--listen", f"{host}:0", "--allow-insecure"
        ) as ns,
    ):
        confs = {
            name: member_conf(
                workdir / f"{name}.conf", controllers, ns.address, inside if name == "a" else host
            )
            for name in "abc"
        }
        # The first to register is elected: the broker inside the namespace.
        isolated = address(brokers.start(confs["a"], namespace.exec))
        names = {isolated: "a", **{address(brokers.start(confs[n])): n for n in "bc"}}
        first = formed(controllers, set(brokers.procs))
        assert first.master_address == isolated, first
        create_everywhere(brokers.procs)
        acked: set[bytes] = set()
        read: set[bytes] = set()

        def reads_all(consumer: PullConsumer) -> bool:
            read.update(m.body for m in consumer.poll(0.2))
            return acked <= read

        with PullConsumer(
            ns.address,
            "faults-consumer",
            TOPIC,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval=1.0,
            long_polling_timeout=1.0,
            master_retry_interval=0.5,
        ) as consumer:
            with Producer(ns.address, "faults-producer") as producer:
                send_until(producer, "before", STEADY, acked)
            wait_for(lambda: reads_all(consumer), WAIT, "the consumer to read from the master")

            end = int(runtime_info(isolated)["commitLogMaxOffset"])
            readable = queue_end(isolated)
            namespace.cut()
            # Sends made to the isolated master, inside its namespace, until the controller
            # replaced it, and one more after.
            answers: list[int | None] = []

            def stale_send() -> None:
                body = f"stale-{len(answers)}".encode()
                answers.append(namespace.call(lambda: send_direct(isolated, body)))

            def replaced() -> GroupState | None:
                stale_send()
                s = state(controllers)
                return s if s and s.master_address not in (None, isolated) else None

            elected = wait_for(replaced, WAIT, "the controller to replace the isolated master")
            stale_send()
            assert elected.master_address in first.sync_state_set - {isolated}, elected
            assert elected.master_epoch > first.master_epoch
            # Each answered, none SEND_OK (FLUSH_SLAVE_TIMEOUT: no ack came in slaveTimeout).
            assert None not in answers, f"a send to the isolated master got no answer: {answers}"
            assert wire.SUCCESS not in answers, f"the isolated master acknowledged: {answers}"
            # It stored them all the same: a tail of its log that no other member has.
            tail = namespace.call(lambda: int(runtime_info(isolated)["commitLogMaxOffset"]))
            assert tail > end, (tail, end)
            # Held back from its consumers: only what every member of its SyncStateSet holds
            # is dispatched (the confirm offset), as RocketMQ's controller-mode broker does.
            held = namespace.call(lambda: queue_end(isolated))
            assert held == readable, f"a consumer of the isolated master could read {held}"
            # A new producer: one that knew the old master would send there until its route
            # expires (30 s, RocketMQ's poll), each send waiting its 3 s for no answer.
            with Producer(ns.address, "faults-producer") as producer:
                send_until(producer, "after", STEADY, acked)
                wait_for(lambda: reads_all(consumer), WAIT, "the consumer to read on")

                namespace.heal()
                healed = formed(controllers, set(brokers.procs))
                assert healed.master_address == elected.master_address, healed
                send_until(producer, "healed", STEADY, acked)
            wait_for(lambda: reads_all(consumer), WAIT, "the consumer to read every SEND_OK")
        brokers.stop_all()

    assert not {b for b in read if b.startswith(b"stale-")}, "a consumer read an unacked message"
    assert elected.master_address is not None
    new = names[elected.master_address]
    logs = {n: stored(confs[n].with_suffix("")) for n in "abc"}
    lost = acked - {body for _, body in logs[new]}
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost: {sorted(lost)[:5]}"
    # The old master follows the new one: its unacknowledged tail cut, it holds the same log.
    assert not [b for _, b in logs["a"] if b.startswith(b"stale-")], "the tail was not cut"
    assert logs["a"] == logs[new]
