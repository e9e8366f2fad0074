"""The producer's native asyncio sends, oneway sends and heartbeats: hundreds of sends in
flight on one connection to a SYNC_MASTER with its slave, sends in flight when the broker dies,
and the broker's view of the producer (HEART_BEAT, UNREGISTER_CLIENT)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

from helpers import SEGMENT, BrokerProcess, RemotingSocket, start_master, start_slave, wait_for
from rocketha import (
    Broker,
    BrokerConfig,
    Message,
    NameServer,
    Producer,
    SendResult,
    SendStatus,
    SendStatusUnknownError,
)
from test_producer import routed_brokers, stored_bodies

NamesrvProcess = tuple[subprocess.Popen[str], str]
GET_BROKER_RUNTIME_INFO = 28


def send_ok(producer: Producer, topic: str) -> bool:
    """One probe send: SEND_OK once the slave is in sync."""
    return producer.send(Message(topic, b"probe")).status is SendStatus.SEND_OK


def waiting_sends(master: BrokerProcess) -> int:
    """Sends the master holds for their slave ack (``groupTransferPending``)."""
    sock = RemotingSocket(master.started["listen_address"])
    try:
        _, body = sock.invoke(GET_BROKER_RUNTIME_INFO, {})
    finally:
        sock.close()
    return int(json.loads(body)["table"].get("groupTransferPending", "0"))


def connections_from_this_process(port: int) -> int:
    """Established TCP connections this process holds to ``port`` on loopback: its socket
    inodes (``/proc/self/fd``) matched against the kernel's table (``/proc/net/tcp``)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].rpartition(":")[2], 16)
        if remote_port == port and fields[3] == "01" and fields[9] in inodes:
            count += 1
    return count


def test_hundreds_of_send_async_in_flight_all_reach_the_slave(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    master = start_master(tmp_path, "broker-a", namesrv)
    slave = start_slave(tmp_path, "slave", None, namesrvAddr=namesrv)
    try:
        with Producer(namesrv, "async-producer") as producer:
            wait_for(lambda: send_ok(producer, "Bulk"), what="the slave to be in sync")

            async def send_all() -> list[SendResult]:
                sends = (producer.send_async(Message("Bulk", b"m%d" % i)) for i in range(500))
                return await asyncio.gather(*sends)

            results = asyncio.run(send_all())
            # Every send, the probes' and the 500's, went over the producer's one connection
            # (the slave has connections of its own to the master: its metadata sync).
            master_port = int(master.started["listen_address"].rpartition(":")[2])
            assert connections_from_this_process(master_port) == 1
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        assert len({r.msg_id for r in results}) == 500
        # SEND_OK means the slave holds it.
        assert {b"m%d" % i for i in range(500)} <= set(stored_bodies(tmp_path / "slave"))
    finally:
        slave.stop()
        master.stop()


def test_sends_in_flight_when_the_broker_dies_fail_as_unknown_not_hang(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    master = start_master(tmp_path, "broker-a", namesrv, slaveTimeout=600_000)
    slave = start_slave(tmp_path, "slave", None, namesrvAddr=namesrv)
    try:
        producer = Producer(namesrv, "doomed-producer", send_timeout=600.0)
        wait_for(lambda: send_ok(producer, "Doomed"), what="the slave to be in sync")
        # A stopped slave never acks: the master holds every send.
        slave.proc.send_signal(signal.SIGSTOP)

        async def kill_mid_flight() -> list[SendResult | BaseException]:
            sends = [
                asyncio.create_task(producer.send_async(Message("Doomed", b"d%d" % i)))
                for i in range(50)
            ]
            await asyncio.to_thread(
                wait_for, lambda: waiting_sends(master) == 50, what="50 sends held"
            )
            master.kill()
            return await asyncio.gather(*sends, return_exceptions=True)

        results = asyncio.run(kill_mid_flight())
        assert all(isinstance(r, SendStatusUnknownError) for r in results), results
        assert "may or may not be stored" in str(results[0])
        producer.shutdown()
    finally:
        slave.proc.send_signal(signal.SIGCONT)
        slave.stop()
        master.stop()


def test_the_producer_heartbeats_its_brokers_and_unregisters_on_close(tmp_path: Path) -> None:
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            broker_name="broker-a",
            store_path_root_dir=str(tmp_path / "a"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
        )
        with Broker(config) as broker:
            wait_for(lambda: routed_brokers(ns.listen_address) == 1, what="the broker's route")
            producer = Producer(ns.listen_address, "beating-producer")
            assert broker.clients() == []
            producer.send(Message("Beat", b"x"))
            assert broker.clients() == [(producer.client_id, ["beating-producer"], [])]
            assert producer.client_id.startswith("127.0.0.1@")
            producer.send_oneway(Message("Beat", b"one way"))
            wait_for(
                lambda: b"one way" in [m.body for m in broker.messages()],
                what="the oneway message",
            )
            producer.close()
            assert broker.clients() == []


def test_heartbeats_repeat_every_interval(tmp_path: Path) -> None:
    with NameServer("127.0.0.1:0") as ns:
        config = BrokerConfig(
            broker_name="broker-a",
            store_path_root_dir=str(tmp_path / "a"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
        )
        with Producer(ns.listen_address, "p", heartbeat_broker_interval=0.05) as producer:
            with Broker(config) as broker:
                wait_for(lambda: routed_brokers(ns.listen_address) == 1, what="the route")
                producer.send(Message("Beat", b"x"))
                port = int(broker.listen_address.rsplit(":", 1)[1])
            # A broker restarted on the same port knows no client until a periodic heartbeat.
            config.listen_port = port
            with Broker(config) as again:
                wait_for(
                    lambda: again.clients() == [(producer.client_id, ["p"], [])],
                    what="a periodic heartbeat",
                )
