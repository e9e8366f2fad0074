"""Transactional messages (issue 28) with the real Java ``TransactionMQProducer`` (clients 4.9.7
and 5.4.0), against Apache RocketMQ 5.4.0's broker and rocketha's alike:

- each message's local transaction (``Peer transact``: its ``txLocal`` property) commits or
  rolls back at once, or answers UNKNOW and then commits, rolls back or stays UNKNOW at every
  check-back (CHECK_TRANSACTION_STATE, sent by the broker to the producer's connection);
- committed messages are delivered exactly once (at once, or after one check-back), rolled back
  ones never; one left UNKNOW is checked ``transactionCheckMax`` times, never delivered, and
  moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` (what RocketMQ 5.x does with it; 4.9 only logged);
- the delivered message carries what RocketMQ 5.4.0's carries (:func:`check_committed`);
- a rocketha SYNC_MASTER SIGKILLed with its transactions still open checks them after its
  restart, and each is delivered once (rocketha only: the harness runs no RocketMQ pair).

"Never" is checked against fences, not a clock: once every expected check-back came and the
discards are in the store, one more transaction (UNKNOW, then committed at its check-back: a
later check round) and a plain message in every queue are sent; everything is read up to them.

Every broker runs with ``transactionTimeOut`` :data:`TIMEOUT_MS`, ``transactionCheckInterval``
:data:`INTERVAL_MS` and ``transactionCheckMax`` :data:`CHECK_MAX`. RocketMQ 5.x also batches the
op messages that mark a half message ended (``transactionOpBatchInterval``, 3 s by default):
with a timeout shorter than that it checks transactions that did end (ended ones are checked
again, committed ones committed again and delivered twice, and all of them finally discarded),
so its broker gets ``transactionOpBatchInterval`` :data:`OP_BATCH_MS` here. rocketha has no such
key. Run: ``pytest -m interop``.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import (
    SEGMENT,
    BrokerProcess,
    runtime_info,
    spawn_rocketha_namesrv,
    start_master,
    wait_for,
    write_conf,
)
from rocketha import ConsumeFromWhere, Message, MessageExt, MessageStore, Producer, PullConsumer

from benches.peers.rocketmq import (
    VERSION_4,
    VERSION_5,
    RocketMQ,
    Transactor,
    TxCheck,
    TxSent,
    Unavailable,
)

pytestmark = pytest.mark.interop

TIMEOUT_MS = 2000
INTERVAL_MS = 1000
CHECK_MAX = 2
#: What every broker of this module is configured with (RocketMQ's keys, which rocketha reads).
TX_KEYS = {
    "transactionTimeOut": TIMEOUT_MS,
    "transactionCheckInterval": INTERVAL_MS,
    "transactionCheckMax": CHECK_MAX,
}
#: RocketMQ 5.x only: write a half message's end marker within 100 ms, not 3 s (module doc).
OP_BATCH_MS = 100
#: The Java broker's segment size (the harness's) and rocketha's (the helpers').
JAVA_SEGMENT = 1 << 20

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
#: ``MessageSysFlag``: the transaction bits, and their value in a committed message.
TRANSACTION_TYPES = 0x3 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
#: Two of each; ``Peer transact`` names them ``{seq}-{state}``.
STATES = [
    "commit",
    "rollback",
    "unknown-then-commit",
    "unknown-then-rollback",
    "unknown-forever",
] * 2
_NAMES = itertools.count()


def rocketmq(version: str) -> RocketMQ:
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


@dataclass
class Cluster:
    kind: str
    namesrv: str
    #: The master's address, where ``Peer transact`` creates its topics.
    broker: str
    store: Path
    segment: int


@pytest.fixture(scope="module", params=["rocketmq", "rocketha"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One master with :data:`TX_KEYS` and its name server, of either kind."""
    root = tmp_path_factory.mktemp(f"tx-{request.param}")
    name = f"tx-{root.name}"
    if request.param == "rocketmq":
        namesrv = request.getfixturevalue("namesrv")
        broker = rocketmq(VERSION_5).broker(
            root / "broker",
            namesrv,
            brokerName=name,
            transactionOpBatchInterval=OP_BATCH_MS,
            **TX_KEYS,
        )
        try:
            namesrv.wait_registered(broker.listen_port)
            yield Cluster("rocketmq", namesrv.address, broker.address, broker.store, JAVA_SEGMENT)
        finally:
            broker.kill()
        return
    with spawn_rocketha_namesrv(root / "namesrv.log") as ns:
        master = start_master(root, name, ns.address, brokerRole="ASYNC_MASTER", **TX_KEYS)
        try:
            address = str(master.started["listen_address"])
            yield Cluster("rocketha", ns.address, address, root / f"{name}-master", SEGMENT)
        finally:
            master.kill()


def stored(store: Path, segment: int, topic: str) -> list[MessageExt]:
    """The messages of ``topic`` a live broker's store holds, read beside it."""
    with MessageStore(store, mapped_file_size_commit_log=segment, read_only=True) as s:
        s.refresh()
        return [m for m in s.messages() if m.topic == topic]


def all_sent(tx: Transactor, count: int) -> list[TxSent]:
    """The first ``count`` sends' outcomes, once they all came."""

    def done() -> bool:
        if tx.exited is not None:
            raise AssertionError(f"Peer transact exited {tx.exited}: {tx.lines[-20:]}")
        return len(tx.sent) >= count

    wait_for(done, what=f"{count} transactional sends")
    return tx.sent[:count]


def expect_sent(sent: list[TxSent]) -> None:
    """Every half message stored (SEND_OK) and each local transaction's first answer."""
    first = {
        "commit": "COMMIT_MESSAGE",
        "rollback": "ROLLBACK_MESSAGE",
        "unknown-then-commit": "UNKNOW",
        "unknown-then-rollback": "UNKNOW",
        "unknown-forever": "UNKNOW",
        "held-then-commit": "UNKNOW",
    }
    refused = [s for s in sent if s.status != "SEND_OK"]
    assert not refused, f"transactional sends refused: {refused}"
    assert [s.local_state for s in sent] == [first[s.state] for s in sent], sent
    for s in sent:
        assert s.transaction_id == s.msg_id, s  # the client's UNIQ_KEY, both


def drain(namesrv: str, topic: str, until: Callable[[list[MessageExt]], bool]) -> list[MessageExt]:
    """Every message of ``topic`` from its first offset, until ``until`` says enough."""
    got: list[MessageExt] = []
    with PullConsumer(
        namesrv,
        f"tx-reader-{next(_NAMES)}",
        topic,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    ) as consumer:

        def enough() -> bool:
            got.extend(consumer.poll(timeout=0.2))
            return until(got)

        wait_for(enough, timeout=120, what=f"the messages of {topic}")
    return got


def fenced(namesrv: str, topic: str, tx: Transactor, queues: int = 4) -> list[MessageExt]:
    """Everything delivered in ``topic`` so far: one more transaction committed at its
    check-back (a check round later than every other), then a plain message in each queue once
    that check came; read up to all of them."""
    count = len(tx.sent) + 1
    tx.send("unknown-then-commit")
    fence = all_sent(tx, count)[-1]
    assert fence.status == "SEND_OK", fence
    wait_for(lambda: tx.times_checked(fence.key) >= 1, what="the fence's check-back")
    with Producer(namesrv, f"tx-fence-{next(_NAMES)}") as producer:
        for q in range(queues):
            producer.send_batch([Message(topic, f"fence-{q}".encode())], queue_id=q)
    expected = {fence.key.encode(), *(f"fence-{q}".encode() for q in range(queues))}

    def all_fences(got: list[MessageExt]) -> bool:
        return expected <= {m.body for m in got}

    got = drain(namesrv, topic, all_fences)
    return [m for m in got if not m.body.startswith(b"fence-") and m.body != fence.key.encode()]


def half_offsets(store: Path, segment: int) -> dict[int, int]:
    """Commit log offsets of the half messages, by their queue offset in the half topic."""
    return {m.queue_offset: m.commitlog_offset for m in stored(store, segment, HALF_TOPIC)}


def check_committed(
    m: MessageExt, s: TxSent, group: str, topic: str, prepared: int, check_times: str | None
) -> None:
    """A delivered committed message as RocketMQ 5.4.0 delivers it: in the queue its half
    message was sent to, TRANSACTION_COMMIT_TYPE in its sys flag, the commit log offset of the
    half message it was committed from as its preparedTransactionOffset; its half message's
    properties less REAL_TOPIC and REAL_QID (TRAN_MSG=true stays: 5.4.0's EndTransactionProcessor
    clears it after encoding the properties), TRANSACTION_CHECK_TIMES the number of check-backs
    before the commit (absent when committed at once)."""
    assert m.topic == topic and m.queue_id == s.queue_id, (m, s)
    assert m.sys_flag & TRANSACTION_TYPES == TRANSACTION_COMMIT_TYPE, (s.key, m.sys_flag)
    assert m.prepared_transaction_offset == prepared, (s.key, m.prepared_transaction_offset)
    p = m.properties
    assert p.get("UNIQ_KEY") == s.msg_id, (s.key, p)
    assert p.get("__transactionId__") == s.transaction_id, (s.key, p)
    assert (p.get("TRAN_MSG"), p.get("PGROUP")) == ("true", group), (s.key, p)
    assert (p.get("KEYS"), p.get("TAGS"), p.get("txLocal")) == (s.key, "tx", s.state), p
    assert "REAL_TOPIC" not in p and "REAL_QID" not in p, (s.key, p)
    assert p.get("TRANSACTION_CHECK_TIMES") == check_times, (s.key, p)


@pytest.mark.parametrize("version", [VERSION_4, VERSION_5])
def test_each_local_transaction_outcome_is_delivered_as_rocketmq_delivers_it(
    cluster: Cluster, workdir: Path, version: str
) -> None:
    n = next(_NAMES)
    topic, group = f"Tx{cluster.kind}{n}", f"tx-{cluster.kind}-{version.replace('.', '')}-{n}"
    tx = rocketmq(version).transactor(
        cluster.namesrv, topic, group, STATES, home=workdir / "producer", broker=cluster.broker
    )
    with tx:
        sent = all_sent(tx, len(STATES))
        expect_sent(sent)
        by_state: dict[str, list[TxSent]] = {}
        for s in sent:
            by_state.setdefault(s.state, []).append(s)
        forever = {s.msg_id for s in by_state["unknown-forever"]}

        def settled() -> bool:
            asked = [s for s in sent if s.state.startswith("unknown-then")]
            return all(tx.times_checked(s.key) >= 1 for s in asked) and all(
                tx.times_checked(s.key) >= CHECK_MAX for s in by_state["unknown-forever"]
            )

        def discarded() -> bool:
            time.sleep(0.2)  # each look opens the store
            held = stored(cluster.store, cluster.segment, CHECK_MAX_TOPIC)
            return forever <= {m.properties.get("UNIQ_KEY") for m in held}

        wait_for(settled, timeout=120, what="the check-backs")
        wait_for(discarded, what=f"the unknown-forever transactions in {CHECK_MAX_TOPIC}")
        delivered = fenced(cluster.namesrv, topic, tx)
        checks = tx.checks
        tx.stop()

    times = Counter(c.key for c in checks)
    expected_checks = {
        s.key: {"unknown-forever": CHECK_MAX}.get(s.state, 1 if "then" in s.state else 0)
        for s in sent
    }
    assert {k: times[k] for k in expected_checks} == expected_checks, checks
    bodies = Counter(m.body.decode() for m in delivered)
    committed = [s for s in sent if s.state in ("commit", "unknown-then-commit")]
    assert bodies == Counter(s.key for s in committed), "delivered: exactly the committed, once"

    halves = half_offsets(cluster.store, cluster.segment)
    by_key = {m.body.decode(): m for m in delivered}
    last_check: dict[str, TxCheck] = {c.key: c for c in checks}
    for s in committed:
        if s.state == "commit":
            check_committed(by_key[s.key], s, group, topic, halves[s.queue_offset], None)
        else:
            # Committed through the check-back's END_TRANSACTION: the half message it named.
            c = last_check[s.key]
            assert (c.answer, c.transaction_id) == ("COMMIT_MESSAGE", s.transaction_id), c
            check_committed(by_key[s.key], s, group, topic, c.commit_log_offset, "1")

    discarded = {
        m.properties["UNIQ_KEY"]: m
        for m in stored(cluster.store, cluster.segment, CHECK_MAX_TOPIC)
        if m.properties.get("PGROUP") == group
    }
    assert set(discarded) == forever, discarded
    for s in by_state["unknown-forever"]:
        m = discarded[s.msg_id]
        assert m.sys_flag & TRANSACTION_TYPES == 0, m.sys_flag
        p = m.properties
        assert (p.get("REAL_TOPIC"), p.get("REAL_QID")) == (topic, str(s.queue_id)), p
        assert p.get("TRANSACTION_CHECK_TIMES") == str(CHECK_MAX), p
        assert (p.get("TRAN_MSG"), p.get("KEYS")) == ("true", s.key), p


# -- a rocketha master SIGKILLed with open transactions ----------------------------------------

KILL_KEYS = {
    **TX_KEYS,
    # The restarted master may check before the producer's next heartbeat (1 s) names its
    # connection again: such a check reaches nobody, but counts.
    "transactionCheckMax": 15,
}
KILLED = 6


@dataclass
class Pair:
    master: BrokerProcess
    slave: BrokerProcess
    name: str
    root: Path
    namesrv: str

    @property
    def address(self) -> str:
        return str(self.master.started["listen_address"])

    def restart_master(self) -> None:
        """The master again, on its store and its old port (the producer's route names it)."""
        port = self.address.rsplit(":", 1)[1]
        self.master = start_master(self.root, self.name, self.namesrv, listenPort=port, **KILL_KEYS)
        wait_for(lambda: slave_connected(self.address), what="the slave to reconnect")


def slave_connected(address: str) -> bool:
    return int(runtime_info(address).get("haConnectionNum", "0")) >= 1


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    """A rocketha SYNC_MASTER with :data:`KILL_KEYS` and its SLAVE, behind a name server of
    their own."""
    name = f"txkill-{next(_NAMES)}"
    with spawn_rocketha_namesrv(tmp_path / "namesrv.log") as ns:
        master = start_master(tmp_path, name, ns.address, **KILL_KEYS)
        slave = None
        p = None
        try:
            slave = BrokerProcess(
                write_conf(
                    tmp_path / "slave.conf",
                    brokerName=name,
                    brokerId=1,
                    brokerRole="SLAVE",
                    storePathRootDir=tmp_path / "slave",
                    mappedFileSizeCommitLog=SEGMENT,
                    listenPort=0,
                    namesrvAddr=ns.address,
                    **KILL_KEYS,
                )
            )
            address = str(master.started["listen_address"])
            wait_for(lambda: slave_connected(address), what="the slave to connect")
            p = Pair(master, slave, name, tmp_path, ns.address)
            yield p
        finally:
            if slave is not None:
                slave.kill()
            master.kill()
            if p is not None:
                p.master.kill()  # the restarted one


@pytest.mark.parametrize("version", [VERSION_4, VERSION_5])
def test_transactions_open_when_the_master_is_sigkilled_commit_at_a_check_after_its_restart(
    pair: Pair, workdir: Path, version: str
) -> None:
    """The local transactions answer UNKNOW (``held-then-commit``) until the master was
    SIGKILLed, so whatever the master checked before its death, only a check-back of the
    master restarted on its store can commit them."""
    topic, group = f"TxKilled{next(_NAMES)}", f"tx-killed-{version.replace('.', '')}"
    tx = rocketmq(version).transactor(
        pair.namesrv,
        topic,
        group,
        ["held-then-commit"] * KILLED,
        home=workdir / "producer",
        broker=pair.address,
    )
    with tx:
        sent = all_sent(tx, KILLED)
        expect_sent(sent)  # a SYNC_MASTER's SEND_OK: each half message is on the slave too
        pair.master.kill()
        # Released with no master alive: only the restarted master's checks can see it (one
        # released later would meet checks counting up to transactionCheckMax meanwhile).
        tx.release()
        pair.restart_master()

        def committed_at_a_check() -> bool:
            # Only a check-back after the release commits.
            commits = {c.key for c in tx.checks if c.answer == "COMMIT_MESSAGE"}
            return {s.key for s in sent} <= commits

        wait_for(committed_at_a_check, timeout=120, what="the restarted master's check-backs")
        delivered = fenced(pair.namesrv, topic, tx)
        tx.stop()
    bodies = Counter(m.body.decode() for m in delivered)
    assert bodies == Counter(s.key for s in sent), "each delivered exactly once"
    for m in delivered:
        assert m.sys_flag & TRANSACTION_TYPES == TRANSACTION_COMMIT_TYPE, m.sys_flag
        assert m.properties.get("UNIQ_KEY") in {s.msg_id for s in sent}, m.properties
