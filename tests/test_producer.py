"""The broker on the network: ``rocketha namesrv``, a SYNC_MASTER ``rocketha broker`` and a SLAVE
that learns its master from the name server, as processes; the project's Producer sends
through the route the name server hands out."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    SEGMENT,
    RemotingSocket,
    broker_fields,
    start_master,
    start_slave,
    wait_for,
)
from rocketha import (
    Broker,
    BrokerConfig,
    Message,
    MessageStore,
    MQBrokerError,
    MQClientError,
    NameServer,
    Producer,
    RemotingConnectError,
    SendStatus,
    SendStatusUnknownError,
)
from rocketha._core import MQClientAPI

NamesrvProcess = tuple[subprocess.Popen[str], str]

#: RocketMQ's ResponseCode values the broker answers bad sends with.
MESSAGE_ILLEGAL, SERVICE_NOT_AVAILABLE, TOPIC_NOT_EXIST = 13, 14, 17
REGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC = 103, 105


def stored_bodies(store: Path) -> list[bytes]:
    with MessageStore(store, mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        s.refresh()
        return [m.body for m in s.messages()]


def test_sync_master_answers_send_ok_once_the_slave_holds_the_message(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    master = start_master(tmp_path, "broker-a", namesrv)
    slave = None
    try:
        with Producer(namesrv, "test-producer") as producer:
            alone = producer.send(Message("Orders", b"before the slave"))
            assert alone.status is SendStatus.SLAVE_NOT_AVAILABLE

            slave = start_slave(tmp_path, "slave", None, namesrvAddr=namesrv)
            assert "haMasterAddress" not in slave.conf.read_text()

            def slave_in_sync() -> bool:
                return b"before the slave" in stored_bodies(tmp_path / "slave")

            wait_for(slave_in_sync, what="the slave to replicate from the name server's address")
            result = producer.send(Message("Orders", b"sync", tags="t1"))
            assert result.status is SendStatus.SEND_OK
            # SEND_OK means the slave holds it: no waiting needed before reading its store.
            assert b"sync" in stored_bodies(tmp_path / "slave")
            assert len(result.msg_id) == 32 and result.offset_msg_id != result.msg_id

            async def send_two() -> list[SendStatus]:
                results = await asyncio.gather(
                    producer.send_async(Message("Orders", b"async-1")),
                    producer.send_async(Message("Orders", b"async-2")),
                )
                return [r.status for r in results]

            assert asyncio.run(send_two()) == [SendStatus.SEND_OK, SendStatus.SEND_OK]
            assert {b"async-1", b"async-2"} <= set(stored_bodies(tmp_path / "slave"))
            batch = producer.send_batch([Message("Orders", b"b1"), Message("Orders", b"b2")])
            assert batch.status is SendStatus.SEND_OK
            assert len(batch.msg_id.split(",")) == 2
            assert stored_bodies(tmp_path / "slave")[-2:] == [b"b1", b"b2"]

        # The slave's own port takes no sends, and says why.
        api = MQClientAPI()
        code, remark, *_ = api.send_message(
            slave.started["listen_address"],
            [Message("Orders", b"to the slave")],
            producer_group="test-producer",
            queue_id=0,
            timeout=5.0,
        )
        assert code == SERVICE_NOT_AVAILABLE
        assert remark is not None and "SLAVE" in remark and "send to its master" in remark
        assert b"to the slave" not in stored_bodies(tmp_path / "slave")
    finally:
        if slave is not None:
            assert slave.stop() == 0, slave.stderr()
        assert master.stop() == 0, master.stderr()


def test_bad_sends_get_rocketmq_codes_and_write_nothing(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    master = start_master(
        tmp_path,
        "broker-a",
        namesrv,
        brokerRole="ASYNC_MASTER",
        autoCreateTopicEnable=False,
        maxMessageSize=1024,
    )
    try:
        with (
            Producer(namesrv, "test-producer") as producer,
            pytest.raises(MQClientError, match="autoCreateTopicEnable=false"),
        ):
            producer.send(Message("Nobody", b"x"))
        api = MQClientAPI()
        addr = master.started["listen_address"]
        code, remark, *_ = api.send_message(
            addr, [Message("Nobody", b"x")], producer_group="p", queue_id=0, timeout=5.0
        )
        assert code == TOPIC_NOT_EXIST
        assert remark is not None and "topic[Nobody] not exist" in remark
        # Real topics exist only as created: the system topic takes a body over the limit.
        code, remark, *_ = api.send_message(
            addr,
            [Message("SELF_TEST_TOPIC", b"x" * 2048)],
            producer_group="p",
            queue_id=0,
            timeout=5.0,
        )
        assert code == MESSAGE_ILLEGAL
        assert remark is not None and "maxMessageSize" in remark
        assert stored_bodies(tmp_path / "broker-a-master") == []
    finally:
        assert master.stop() == 0, master.stderr()


def test_a_broker_error_carries_code_and_remark(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    _, namesrv = namesrv_process
    master = start_master(
        tmp_path, "broker-a", namesrv, brokerRole="ASYNC_MASTER", maxMessageSize=1024
    )
    try:
        with Producer(namesrv, "test-producer") as producer:
            assert producer.send(Message("Small", b"ok")).status is SendStatus.SEND_OK
            with pytest.raises(MQBrokerError) as err:
                producer.send(Message("Small", b"x" * 2048))
            assert err.value.code == MESSAGE_ILLEGAL
            assert "maxMessageSize" in err.value.remark
            # A negative delay, and a level that is no number: refused, never delivered early.
            for delayed, needle in (
                ({"TIMER_DELAY_SEC": "-5"}, "TIMER_DELAY_SEC=-5 is negative"),
                ({"DELAY": "soon"}, 'DELAY="soon"'),
            ):
                with pytest.raises(MQBrokerError) as err:
                    producer.send(Message("Small", b"later", properties=delayed))
                assert err.value.code == MESSAGE_ILLEGAL
                assert needle in err.value.remark
        assert stored_bodies(tmp_path / "broker-a-master") == [b"ok"]
    finally:
        assert master.stop() == 0, master.stderr()


def test_produce_cli(tmp_path: Path, namesrv_process: NamesrvProcess) -> None:
    _, namesrv = namesrv_process
    master = start_master(tmp_path, "broker-a", namesrv, brokerRole="ASYNC_MASTER")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "rocketha", "produce", "--namesrv", namesrv, "--topic", "Cli"],
            input="one\ntwo\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "sent 2 messages to Cli" in out and "SEND_OK 2" in out
        assert stored_bodies(tmp_path / "broker-a-master") == [b"one", b"two"]
    finally:
        assert master.stop() == 0, master.stderr()


def register_fake_broker(namesrv: str, name: str, addr: str) -> RemotingSocket:
    """Registers broker group ``name`` at ``addr`` offering TBW102; keep the returned connection
    open (the name server forgets brokers whose connection closes)."""
    body = json.dumps(
        {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000},
                "topicConfigTable": {
                    topic: {"topicName": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 7}
                    for topic in ("TBW102", "SELF_TEST_TOPIC")
                },
            },
        }
    ).encode()
    fields = {**broker_fields(0, addr, "", body), "brokerName": name}
    sock = RemotingSocket(namesrv)
    assert sock.invoke(REGISTER_BROKER, fields, body)[0]["code"] == 0
    return sock


def routed_brokers(namesrv: str) -> int:
    """Broker groups in TBW102's route."""
    client = RemotingSocket(namesrv)
    try:
        response, body = client.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    finally:
        client.close()
    return len(json.loads(body)["brokerDatas"]) if response["code"] == 0 else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_send_that_cannot_connect_is_retried_on_another_broker_group(tmp_path: Path) -> None:
    with NameServer("127.0.0.1:0") as ns:
        # "broker-a" sorts first, so the first queue picked is on the dead broker.
        dead = register_fake_broker(ns.listen_address, "broker-a", f"127.0.0.1:{free_port()}")
        config = BrokerConfig(
            broker_name="broker-b",
            store_path_root_dir=str(tmp_path / "b"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
        )
        with Broker(config) as live:
            wait_for(lambda: routed_brokers(ns.listen_address) == 2, what="broker-b's route")
            with Producer(ns.listen_address, "p", retry_times_when_send_failed=0) as once:
                with pytest.raises(MQClientError, match="after 1 attempts") as err:
                    once.send(Message("Fresh", b"lost"))
                assert isinstance(err.value.__cause__, RemotingConnectError)
            with Producer(ns.listen_address, "p") as producer:
                result = producer.send(Message("Fresh", b"retried"))
            assert (result.status, result.queue.broker_name) == (SendStatus.SEND_OK, "broker-b")
            assert [m.body for m in live.messages()] == [b"retried"]
        dead.close()


def test_a_send_whose_answer_is_lost_is_not_retried(tmp_path: Path) -> None:
    with NameServer("127.0.0.1:0") as ns, socket.socket() as silent:
        # Accepts connections (the kernel's backlog) and never answers.
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        fake = register_fake_broker(ns.listen_address, "broker-a", addr)
        config = BrokerConfig(
            broker_name="broker-b",
            store_path_root_dir=str(tmp_path / "b"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            ha_listen_port=0,
            ha_listen_address="127.0.0.1",
            namesrv_addr=ns.listen_address,
        )
        with Broker(config) as live, Producer(ns.listen_address, "p", send_timeout=0.5) as p:
            wait_for(lambda: routed_brokers(ns.listen_address) == 2, what="broker-b's route")
            with pytest.raises(SendStatusUnknownError, match="may or may not be stored"):
                p.send(Message("Fresh", b"maybe"))
            assert live.store.max_offset == 0, "not retried on broker-b"
        fake.close()
