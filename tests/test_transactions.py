"""Transactional messages (issue 28): half messages no consumer sees, END_TRANSACTION's commit
and rollback, the broker's check-back to the producer group, discard after
``transactionCheckMax`` checks, bad ends answered with RocketMQ's codes, and a master SIGKILLed
with transactions pending, which checks them again once restarted: none lost, none twice.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    SEGMENT,
    RemotingSocket,
    RochaNamesrv,
    routed,
    spawn_rocketha_namesrv,
    start_master,
    start_slave,
    wait_for,
)
from rocketha import (
    Broker,
    BrokerConfig,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MQBrokerError,
    NameServer,
    Producer,
    PullConsumer,
    TransactionState,
)

END_TRANSACTION = 37
GET_MAX_OFFSET = 30
#: Checked 0.3 s after birth, every 0.2 s, at most 3 times.
FAST_CHECKS = {"transactionTimeOut": 300, "transactionCheckInterval": 200, "transactionCheckMax": 3}
#: Checks that wait for the kill and restart (2 s), then keep asking (a check that finds no
#: producer connected counts, as RocketMQ counts it).
KILL_CHECKS = {**FAST_CHECKS, "transactionTimeOut": 2000, "transactionCheckMax": 100}
COMMIT, ROLLBACK = TransactionState.COMMIT, TransactionState.ROLLBACK


def fast_checks_config(root: Path, name: str, namesrv: str, **keys: object) -> BrokerConfig:
    return BrokerConfig(
        broker_name=name,
        broker_role="SYNC_MASTER",
        store_path_root_dir=str(root / name),
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        namesrv_addr=namesrv,
        transaction_time_out=300,
        transaction_check_interval=200,
        transaction_check_max=3,
        **keys,
    )


@pytest.fixture
def group(tmp_path: Path) -> Iterator[tuple[str, Broker, Broker]]:
    """A name server, and a SYNC_MASTER with its slave (which serves pulls), checking fast."""
    with (
        NameServer("127.0.0.1:0") as ns,
        Broker(fast_checks_config(tmp_path, "tx", ns.listen_address)) as master,
    ):
        slave_conf = BrokerConfig(
            broker_name="tx",
            broker_role="SLAVE",
            broker_id=1,
            store_path_root_dir=str(tmp_path / "tx-slave"),
            mapped_file_size_commit_log=SEGMENT,
            listen_port=0,
            namesrv_addr=ns.listen_address,
            ha_master_address=master.ha_address,
            slave_read_enable=True,
            slave_sync_interval=100,
        )
        with Broker(slave_conf) as slave:
            assert master.ha is not None
            assert master.ha.wait_for_state(None, "TRANSFER", timeout=60)
            yield ns.listen_address, master, slave


class Checks:
    """A check-back that answers by the message's key, and counts each."""

    def __init__(self, answers: dict[str, TransactionState]) -> None:
        self.answers = answers
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, msg: MessageExt) -> TransactionState:
        key = msg.keys[0]
        with self.lock:
            self.seen[key] += 1
        return self.answers.get(key.split("-")[0], TransactionState.UNKNOWN)


def consume(ns: str, topic: str, group: str, want: int) -> list[MessageExt]:
    """Every message of ``topic`` from the first offset, once ``want`` are in."""
    got: list[MessageExt] = []
    with PullConsumer(
        ns, group, [topic], consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as consumer:

        def enough() -> bool:
            got.extend(consumer.poll(0.3))
            return len(got) >= want

        wait_for(enough, timeout=60, what=f"{want} messages of {topic}")
        # Anything more would come now: a duplicate or a message that should never be seen.
        got.extend(consumer.poll(1.0))
    return got


def max_offset(address: str, topic: str, queue_id: int = 0) -> int:
    sock = RemotingSocket(address)
    try:
        response, _ = sock.invoke(GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    finally:
        sock.close()
    return int(response["extFields"]["offset"]) if response["code"] == 0 else -1


def test_commit_rollback_check_back_and_discard(group: tuple[str, Broker, Broker]) -> None:
    ns, master, slave = group
    topic = "Orders"
    checks = Checks({"late": COMMIT, "never": ROLLBACK})
    executed: Counter[str] = Counter()

    def execute(msg: Message) -> TransactionState:
        kind = msg.keys[0].split("-")[0]
        executed[kind] += 1
        return {"commit": COMMIT, "rollback": ROLLBACK}.get(kind, TransactionState.UNKNOWN)

    kinds = ("commit", "rollback", "late", "never", "forever")
    with Producer(ns, "tx-producer") as producer:
        results = {
            f"{kind}-{i}": producer.send_in_transaction(
                Message(topic, f"{kind}-{i}".encode(), keys=f"{kind}-{i}"), execute, checks
            )
            for kind in kinds
            for i in range(5)
        }
        assert {r.local_state for k, r in results.items() if k.startswith("late")} == {
            TransactionState.UNKNOWN
        }
        assert all(r.transaction_id == r.send_result.msg_id for r in results.values())
        # "forever" is checked transactionCheckMax times, then discarded.
        wait_for(
            lambda: max_offset(master.listen_address, "TRANS_CHECK_MAX_TIME_TOPIC") == 5,
            what="the 5 unanswered transactions discarded",
        )
    assert executed == dict.fromkeys(kinds, 5)
    assert all(checks.seen[f"forever-{i}"] == 3 for i in range(5)), checks.seen
    assert all(checks.seen[f"late-{i}"] == 1 for i in range(5)), checks.seen
    assert not any(checks.seen[f"{k}-{i}"] for k in ("commit", "rollback") for i in range(5))
    want = sorted(f"{k}-{i}" for k in ("commit", "late") for i in range(5))
    got = consume(ns, topic, "tx-consumer", len(want))
    assert sorted(m.body.decode() for m in got) == want
    # The delivered message is the producer's, in its own topic and queue: no half-message
    # bookkeeping left in its properties.
    for m in got:
        assert m.topic == topic and "REAL_TOPIC" not in m.properties, m.properties
        assert m.properties["PGROUP"] == "tx-producer"
    # The slave replicated the commits (and every half message, copy and op) byte for byte.
    wait_for(lambda: slave.max_offset == master.max_offset, what="the slave to catch up")
    on_slave = [m.body.decode() for m in slave.messages() if m.topic == topic]
    assert sorted(on_slave) == want


def test_asyncio_send_in_transaction(group: tuple[str, Broker, Broker]) -> None:
    ns, _, _ = group

    async def commit(msg: Message) -> TransactionState:
        await asyncio.sleep(0)
        return COMMIT

    async def main() -> list[str]:
        with Producer(ns, "tx-async") as producer:
            sent = [
                await producer.send_in_transaction_async(
                    Message("AsyncTx", f"a{i}".encode()), commit
                )
                for i in range(10)
            ]
        return [r.local_state for r in sent]

    assert asyncio.run(main()) == [COMMIT] * 10
    got = consume(ns, "AsyncTx", "tx-async-consumer", 10)
    assert sorted(m.body for m in got) == sorted(f"a{i}".encode() for i in range(10))


def end(sock: RemotingSocket, **fields: object) -> tuple[int, str]:
    header = {
        "producerGroup": "tx-bad",
        "tranStateTableOffset": "0",
        "commitLogOffset": "0",
        "commitOrRollback": "8",
        "fromTransactionCheck": "false",
        "msgId": "x",
        **{k: str(v) for k, v in fields.items()},
    }
    response, _ = sock.invoke(END_TRANSACTION, header)
    return response["code"], response.get("remark", "")


def test_bad_ends_get_rocketmq_codes_and_change_nothing(group: tuple[str, Broker, Broker]) -> None:
    ns, master, slave = group
    with Producer(ns, "tx-bad") as producer:
        plain = producer.send(Message("BadEnds", b"plain"))
        held = producer.send_in_transaction(
            Message("BadEnds", b"held"), lambda m: TransactionState.UNKNOWN
        )
        rolled = producer.send_in_transaction(Message("BadEnds", b"rolled"), lambda m: ROLLBACK)
    half = held.send_result
    half_offset = int(half.offset_msg_id[-16:], 16)
    sock = RemotingSocket(master.listen_address)
    try:
        code, remark = end(sock, commitLogOffset=int(plain.offset_msg_id[-16:], 16))
        assert code == 1 and "not a half message" in remark, remark
        code, remark = end(sock, commitLogOffset=master.store.max_offset + 1000)
        assert code == 1 and "no message at commit log offset" in remark, remark
        code, remark = end(sock, commitLogOffset=-5)
        assert code == 1, remark
        wrong_group = {"commitLogOffset": half_offset, "tranStateTableOffset": half.queue_offset}
        code, remark = end(sock, **{**wrong_group, "producerGroup": "someone-else"})
        assert code == 1 and "producer group" in remark, remark
        code, remark = end(sock, commitLogOffset=half_offset, tranStateTableOffset=99)
        assert code == 1 and "state table offset" in remark, remark
        code, remark = end(sock, commitLogOffset=half_offset, commitOrRollback=5)
        assert code == 1 and "commitOrRollback 5" in remark, remark
        # The rolled back one cannot be committed; the held one commits once, twice answered.
        r = rolled.send_result
        code, remark = end(
            sock,
            commitLogOffset=int(r.offset_msg_id[-16:], 16),
            tranStateTableOffset=r.queue_offset,
        )
        assert code == 604 and "rolled back already" in remark, remark
        for _ in range(2):
            code, remark = end(
                sock, commitLogOffset=half_offset, tranStateTableOffset=half.queue_offset
            )
            assert code == 0, remark
        code, remark = end(
            sock,
            commitLogOffset=half_offset,
            tranStateTableOffset=half.queue_offset,
            commitOrRollback=12,
        )
        assert code == 604 and "committed already" in remark, remark
    finally:
        sock.close()
    slave_sock = RemotingSocket(slave.listen_address)
    try:
        code, remark = end(slave_sock, commitLogOffset=half_offset)
        assert code == 11 and "slave" in remark, remark
    finally:
        slave_sock.close()
    got = consume(ns, "BadEnds", "tx-bad-consumer", 2)
    assert sorted(m.body for m in got) == [b"held", b"plain"]


def test_a_producer_refused_by_reject_transaction_message(tmp_path: Path) -> None:
    with (
        NameServer("127.0.0.1:0") as ns,
        Broker(
            fast_checks_config(
                tmp_path, "rejecting", ns.listen_address, reject_transaction_message=True
            )
        ),
        Producer(ns.listen_address, "tx-rejected") as producer,
        pytest.raises(MQBrokerError, match="rejectTransactionMessage"),
    ):
        producer.send_in_transaction(Message("Refused", b"x"), lambda m: COMMIT)


def test_a_producer_group_gone_for_good_is_discarded_after_the_checks(
    group: tuple[str, Broker, Broker],
) -> None:
    """No member of the group is connected to answer: each round counts as a check (RocketMQ
    counts it too), and the half message is discarded after ``transactionCheckMax``."""
    ns, master, _ = group
    with Producer(ns, "tx-gone") as producer:
        producer.send_in_transaction(Message("Gone", b"g"), lambda m: TransactionState.UNKNOWN)
    wait_for(
        lambda: max_offset(master.listen_address, "TRANS_CHECK_MAX_TIME_TOPIC") == 1,
        what="the transaction of the departed group discarded",
    )
    with PullConsumer(
        ns,
        "tx-gone-consumer",
        ["Gone"],
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:
        assert consumer.poll(1.0) == []


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[RochaNamesrv]:
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        yield ns


def test_master_sigkill_with_transactions_pending(tmp_path: Path, namesrv: RochaNamesrv) -> None:
    """Half messages whose outcome the producer did not send before the master died are
    checked by the restarted master; each commits once, and the slave has them too."""
    ns = namesrv.address
    master = start_master(tmp_path, "txk", ns, **KILL_CHECKS)
    slave = start_slave(tmp_path, "txk-slave", None, brokerName="txk", namesrvAddr=ns)
    topic = "KilledTx"
    try:
        with Producer(ns, "tx-killed") as producer:
            sent = [
                producer.send_in_transaction(
                    Message(topic, f"k{i}".encode(), keys=f"late-{i}"),
                    lambda m: TransactionState.UNKNOWN,
                )
                for i in range(20)
            ]
            committed = producer.send_in_transaction(Message(topic, b"done"), lambda m: COMMIT)
        assert {s.local_state for s in sent} == {TransactionState.UNKNOWN}
        assert committed.local_state is COMMIT
        master.kill()
        port = str(master.started["listen_address"]).rsplit(":", 1)[1]
        master = start_master(tmp_path, "txk", ns, **KILL_CHECKS, listenPort=port)
        wait_for(lambda: routed(ns, topic), what="the route again")
        # A new producer of the group answers the restarted master's checks.
        checks = Checks({"late": COMMIT})
        with Producer(ns, "tx-killed", check_transaction=checks) as producer:
            producer.send(Message("Wake", b"route"))  # heartbeats start with a route
            want = [b"done", *(f"k{i}".encode() for i in range(20))]
            got = consume(ns, topic, "tx-killed-consumer", len(want))
        assert sorted(m.body for m in got) == sorted(want)
        assert set(checks.seen) == {f"late-{i}" for i in range(20)}
        slave_addr = str(slave.started["listen_address"])
        wait_for(
            lambda: (
                max_offset(slave_addr, topic) == max_offset(master.started["listen_address"], topic)
            ),
            what="the slave to hold the commits",
        )
    finally:
        master.stop()
        slave.stop()
