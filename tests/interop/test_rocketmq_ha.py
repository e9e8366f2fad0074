"""rocketha against the real Apache RocketMQ (Java), both directions, on 127.0.0.1.

a. A RocketMQ master (ASYNC_MASTER / SYNC_MASTER, 4.9 and 5.x) fed by the Java producer
   replicates to a rocketha slave: the commit logs are byte-identical, the consume queues equal,
   and a SYNC_MASTER answers SEND_OK only once our slave has acked.
b. A rocketha master replicates to a RocketMQ slave (brokerRole=SLAVE, haMasterAddress set):
   byte-identical, our SYNC_MASTER puts answered PUT_OK on the Java slave's acks; with
   ``syncFromLastFile`` both ways of starting an empty slave.
c. Stores both ways: a RocketMQ broker serves a store rocketha wrote to the Java consumer, and
   rocketha reads (``rocketha inspect``, read-only ``MessageStore``) a store RocketMQ wrote.

Every comparison reads the files with the harness's own decoder (``benches/peers/rocketmq.py``),
not rocketha's, so rocketha is never its own judge. Run: ``pytest -m interop``.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import wait_for
from rocketha import Broker, BrokerConfig, Message, MessageStore, PutStatus

from benches.peers.rocketmq import (
    VERSION_4,
    VERSION_5,
    VERSIONS,
    NameServer,
    RocketMQ,
    Sent,
    Unavailable,
    body,
    consume_queues,
    log_bytes,
    log_end,
    log_segments,
)

pytestmark = pytest.mark.interop

SEG = 1 << 20
#: Consume queue files of 1,000 entries (both sides), so queues span several files too. The
#: ASYNC_MASTER runs keep RocketMQ's default (300,000 entries) instead.
CQ_ENTRIES = 1000
CQ_BYTES = CQ_ENTRIES * 20
DEFAULT_CQ_BYTES = 300_000 * 20
#: Body sizes the Java producer cycles through: tiny, > 4 KiB (the client zlib-compresses
#: those), and 80,000 (about 47 KiB compressed: one record spans two 32 KiB HA frames).
SIZES = [100, 2000, 80_000, 17, 9000]
N = 300
#: Sent before the rocketha slave connects in the ASYNC_MASTER runs (about 1.3 MiB).
N_BEFORE = 120
#: A SYNC_MASTER without a slave gives up after this (5.x waits for it; 4.9 answers at once).
SLAVE_TIMEOUT = 1000


def resolve(version: str) -> RocketMQ:
    """Maven resolves the pinned version on first use; with java and mvn present, a failure
    to resolve is a failure, not a skip."""
    try:
        return RocketMQ.resolve(version)
    except Unavailable as e:
        pytest.fail(str(e))


#: Short HA timers for the idle checks: a link with nothing to send must stay up on heartbeats
#: alone, through several housekeeping periods (both sides drop a link silent that long).
FAST_HA = {"haSendHeartbeatInterval": 500, "haHousekeepingInterval": 2000}
FAST_HA_OURS = {"ha_send_heartbeat_interval": 500, "ha_housekeeping_interval": 2000}
IDLE = 2.5
#: In the SYNC_MASTER runs every 25th message is sent with a delay (level 4, 30 s).
DELAY_EVERY = 25
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def rocketha_slave(store: Path, master: str, cq_bytes: int = CQ_BYTES, **keys: object) -> Broker:
    return Broker(
        BrokerConfig(
            broker_role="SLAVE",
            broker_id=1,
            store_path_root_dir=str(store),
            ha_master_address=master,
            mapped_file_size_commit_log=SEG,
            mapped_file_size_consume_queue=cq_bytes,
            listen_port=0,
            **keys,  # type: ignore[arg-type]
        )
    ).start()


def first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def assert_same_log(java: Path, ours: Path, start: int, end: int) -> None:
    """Byte-identical commit logs over [start, end), the same segment files holding them."""

    def names(store: Path) -> list[str]:
        return [p.name for p in log_segments(store) if start <= int(p.name) < end]

    assert names(ours) == names(java), "different segment files"
    for store in (java, ours):
        sizes = {p.name: p.stat().st_size for p in log_segments(store)}
        assert set(sizes.values()) == {SEG}, f"{store}: segment sizes {sizes}"
    theirs, mine = log_bytes(java, start, end), log_bytes(ours, start, end)
    assert len(theirs) == end - start
    if theirs != mine:
        i = first_difference(theirs, mine)
        at = start + i
        raise AssertionError(
            f"commit logs differ at offset {at} (segment {at - at % SEG:020d} + {at % SEG}): "
            f"RocketMQ {theirs[i : i + 16].hex()} rocketha {mine[i : i + 16].hex()}"
        )


def queues_match_sends(queues: dict, topic: str, sent: list[Sent]) -> None:
    for s in sent:
        entry = queues[(topic, s.queue_id)][s.queue_offset]
        assert entry[0] == s.commit_log_offset, (s, entry)


def entries(store: Path) -> int:
    return sum(len(q) for q in consume_queues(store).values())


# -- a. RocketMQ master -> rocketha slave ------------------------------------------------------


@dataclass
class JavaMasterRun:
    """One RocketMQ master fed by the Java producer, with a rocketha slave attached."""

    version: str
    role: str
    java_store: Path
    slave_store: Path
    topic: str
    sent: list[Sent]
    control: list[Sent]
    #: Where the master started our (empty) slave: the start of its last file at connect.
    start: int
    end: int
    end_after_stop: int
    slave_max_offset: int
    #: The slave's HA state and connection count after an idle period (ASYNC runs).
    after_idle: tuple[str, int] | None
    #: The restarted slave's max offset (ASYNC runs restart it once caught up).
    resumed_from: int | None
    java_logs: str


_runs: dict[tuple[str, str], JavaMasterRun | BaseException] = {}


def java_master_run(version: str, role: str, root: Path, namesrv: NameServer) -> JavaMasterRun:
    """Runs the scenario once per (version, role); the store tests read the ASYNC run's store
    afterwards, whichever test asks first."""
    key = (version, role)
    if key not in _runs:
        try:
            _runs[key] = _run_java_master(resolve(version), role, root, namesrv)
        except BaseException as e:
            _runs[key] = e
            raise
    run = _runs[key]
    if isinstance(run, BaseException):
        raise AssertionError(f"the {version} {role} run failed earlier: {run!r}")
    return run


def _run_java_master(rmq: RocketMQ, role: str, root: Path, namesrv: NameServer) -> JavaMasterRun:
    home = root / f"java-master-{rmq.version}-{role}"
    tag = f"{rmq.major}{role[0]}"
    topic = f"InteropT{tag}"
    cq_bytes = DEFAULT_CQ_BYTES if role == "ASYNC_MASTER" else CQ_BYTES
    conf = {
        "brokerName": f"rmq-master-{tag}",
        "brokerRole": role,
        "mappedFileSizeConsumeQueue": cq_bytes,
        "slaveTimeout": SLAVE_TIMEOUT,
    }
    if role == "SYNC_MASTER":
        # 5.x: with the default inSyncReplicas=1 a SYNC_MASTER waits for no slave at all.
        conf["inSyncReplicas"] = 2
    else:
        conf.update(FAST_HA)
    java = rmq.broker(home / "java-master", namesrv, **conf)
    control: list[Sent] = []
    sent: list[Sent] = []
    try:
        if role == "SYNC_MASTER":
            # No slave yet: the master must not answer SEND_OK, or SEND_OK below proves nothing.
            control = rmq.produce(
                namesrv.address, f"{topic}C", 1, [64], home=home / "control", broker=java.address
            )
        else:
            # More than a segment before the slave: RocketMQ starts an empty slave at the
            # beginning of its last file, so ours must accept a log that starts there.
            sent = rmq.produce(
                namesrv.address, topic, N_BEFORE, SIZES, home=home / "before", broker=java.address
            )
        at_connect = log_end(java.store)
        start = at_connect - at_connect % SEG
        fast = FAST_HA_OURS if role == "ASYNC_MASTER" else {}
        slave = rocketha_slave(home / "rocketha-slave", java.ha_address, cq_bytes, **fast)
        resumed_from = None
        try:
            wait_for(lambda: slave.ha_status()["state"] == "TRANSFER", 30, "the slave to connect")
            if fast:
                # A restarted slave reports its own max offset; the master goes on from there.
                wait_for(lambda: slave.max_offset >= at_connect, 60, "the slave to catch up")
                slave.shutdown()
                slave = rocketha_slave(home / "rocketha-slave", java.ha_address, cq_bytes, **fast)
                resumed_from = slave.max_offset
                wait_for(lambda: slave.ha_status()["state"] == "TRANSFER", 30, "a reconnect")
            count = N - len(sent)
            sent += rmq.produce(
                namesrv.address,
                topic,
                count,
                SIZES,
                home=home / "producer",
                broker=java.address,
                # SYNC runs: some wait in SCHEDULE_TOPIC_XXXX (see the delayed-message test).
                delay_every=DELAY_EVERY if role == "SYNC_MASTER" else 0,
            )
            end = log_end(java.store)
            wait_for(lambda: slave.max_offset >= end, 60, f"the slave to reach {end}")
            slave_max = slave.max_offset
            # RocketMQ builds its consume queues asynchronously (reput).
            wait_for(lambda: entries(java.store) >= len(sent) + len(control), 30, "dispatch")
            after_idle = None
            if fast:
                time.sleep(IDLE)  # the idle period under test, not a wait for readiness
                status = slave.ha_status()
                after_idle = (status["state"], status["connects"])
        finally:
            slave.shutdown()
    finally:
        # The ASYNC run's store is read as "a store RocketMQ wrote": stop it cleanly (its
        # shutdown hook flushes and removes the abort marker). The files of a killed broker
        # hold everything too (mmap'd writes are in the page cache), without the slow stop.
        if role == "ASYNC_MASTER":
            java.stop()
        else:
            java.kill()
    return JavaMasterRun(
        rmq.version,
        role,
        java.store,
        home / "rocketha-slave",
        topic,
        sent,
        control,
        start,
        end,
        log_end(java.store),
        slave_max,
        after_idle,
        resumed_from,
        java.logs(),
    )


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
@pytest.mark.parametrize("version", VERSIONS)
def test_rocketmq_master_to_rocketha_slave(
    version: str, role: str, interop_root: Path, namesrv: NameServer
) -> None:
    run = java_master_run(version, role, interop_root, namesrv)

    assert [s.status for s in run.sent] == ["SEND_OK"] * N
    if role == "SYNC_MASTER":
        # Before our slave connected: 4.9 answers SLAVE_NOT_AVAILABLE at once, 5.x
        # FLUSH_SLAVE_TIMEOUT after slaveTimeout. After it: SEND_OK, on our acks.
        assert [s.status for s in run.control] in (
            ["SLAVE_NOT_AVAILABLE"],
            ["FLUSH_SLAVE_TIMEOUT"],
        )
    assert run.end_after_stop == run.end, "RocketMQ wrote after the producer finished"
    assert run.slave_max_offset == run.end
    assert log_end(run.slave_store) == run.end
    assert len([p for p in log_segments(run.java_store) if int(p.name) < run.end]) >= 4
    if role == "ASYNC_MASTER":
        assert run.start >= SEG, "the master had one segment only when the slave connected"
        # RocketMQ's heartbeats (empty frames) and our offset reports kept the link up.
        assert run.after_idle == ("TRANSFER", 1), run.after_idle
        assert run.resumed_from is not None and run.resumed_from > run.start
    else:
        assert run.start == 0
    # Our slave holds exactly what the master sent it: from its last file at connect on.
    assert int(log_segments(run.slave_store)[0].name) == run.start
    assert_same_log(run.java_store, run.slave_store, run.start, run.end)

    theirs, ours = consume_queues(run.java_store), consume_queues(run.slave_store)
    queues_match_sends(theirs, run.topic, [s for s in run.sent if not s.delay_level])
    # The delayed messages' queue: see test_rocketha_slave_indexes_delayed_messages_as_rocketmq.
    for queues in (theirs, ours):
        for key in [k for k in queues if k[0] == SCHEDULE_TOPIC]:
            del queues[key]
    held = {
        key: {q: e for q, e in queue.items() if e[0] >= run.start} for key, queue in theirs.items()
    }
    assert sorted(ours) == sorted(k for k, v in held.items() if v)
    for key, queue in ours.items():
        assert queue == held[key], f"consume queue {key} differs"


@pytest.mark.parametrize("version", VERSIONS)
def test_rocketha_slave_indexes_delayed_messages_as_rocketmq(
    version: str, interop_root: Path, namesrv: NameServer
) -> None:
    """A message sent with a delay level waits in SCHEDULE_TOPIC_XXXX, queue level - 1, and
    RocketMQ's consume queue entry for it carries its delivery time (store timestamp + the
    level's delay) where other entries carry the tag hash: ScheduleMessageService scans that
    queue by it. A slave's consume queues must say the same, or a slave promoted to master
    (or read by tools) delivers delayed messages at the wrong time."""
    run = java_master_run(version, "SYNC_MASTER", interop_root, namesrv)
    delayed = [s for s in run.sent if s.delay_level]
    assert len(delayed) == N // DELAY_EVERY
    theirs = {k: v for k, v in consume_queues(run.java_store).items() if k[0] == SCHEDULE_TOPIC}
    ours = {k: v for k, v in consume_queues(run.slave_store).items() if k[0] == SCHEDULE_TOPIC}
    assert sum(len(q) for q in theirs.values()) == len(delayed)
    assert ours == theirs


# -- c. rocketha reads a store RocketMQ wrote --------------------------------------------------


def expected_body(stored: bytes, sys_flag: int, seq: int, size: int) -> bool:
    """The Java client zlib-compresses bodies over 4 KiB (sysflag bit 0) before sending."""
    raw = zlib.decompress(stored) if sys_flag & 1 else stored
    return raw == body(seq, size)


@pytest.mark.parametrize("version", VERSIONS)
def test_rocketha_reads_a_store_rocketmq_wrote(
    version: str, interop_root: Path, namesrv: NameServer
) -> None:
    run = java_master_run(version, "ASYNC_MASTER", interop_root, namesrv)
    store = run.java_store
    assert not (store / "abort").exists(), "RocketMQ did not shut down cleanly"

    inspect = subprocess.run(
        [sys.executable, "-m", "rocketha", "inspect", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert inspect.returncode == 0, inspect.stdout[-2000:] + inspect.stderr[-2000:]
    assert f"{N} records, every CRC verified" in inspect.stdout

    by_offset = {s.commit_log_offset: s for s in run.sent}
    with MessageStore(store, mapped_file_size_commit_log=SEG, read_only=True) as ms:
        assert (ms.min_offset, ms.max_offset) == (0, run.end)
        messages = list(ms.messages(check_crc=True))
        assert len(messages) == N
        for m in messages:
            s = by_offset[m.commitlog_offset]
            assert (m.topic, m.queue_id, m.queue_offset) == (run.topic, s.queue_id, s.queue_offset)
            assert m.tags == f"t{s.seq % 3}"
            assert m.keys == [f"k{s.seq}"]
            assert m.msg_id == s.offset_msg_id
            assert expected_body(m.body, m.sys_flag, s.seq, s.body_len), m.commitlog_offset
        java_queues = consume_queues(store)
        counts = {(t, q): (lo, hi) for t, q, lo, hi in ms.queues()}
        assert counts == {k: (0, len(v)) for k, v in java_queues.items()}
        for (topic, qid), queue in java_queues.items():
            assert sorted(queue) == list(range(len(queue)))
            got = ms.get_messages(topic, qid, 0, len(queue) + 10)
            want = [(queue[q][0], queue[q][1]) for q in sorted(queue)]
            assert [(m.commitlog_offset, m.store_size) for m in got] == want
        # RocketMQ's index files answer rocketha's lookups: by key, and by the msgId the Java
        # producer got back (its UNIQ_KEY).
        assert sorted(p.name for p in (store / "index").iterdir())
        for s in run.sent[:: max(1, len(run.sent) // 25)]:
            # Two producer runs sent seq 0, 1, ...: each key is on one message of each.
            same_key = sorted(o.commit_log_offset for o in run.sent if o.seq == s.seq)
            assert [m.commitlog_offset for m in ms.find(run.topic, f"k{s.seq}")] == same_key
            by_id = ms.find(run.topic, s.msg_id, unique=True)
            assert [m.commitlog_offset for m in by_id] == [s.commit_log_offset]


@pytest.mark.parametrize("version", VERSIONS)
def test_rocketha_inspects_a_store_with_other_consume_queue_files(
    version: str, interop_root: Path, namesrv: NameServer
) -> None:
    """The SYNC_MASTER runs' stores: 1,000-entry consume queue files (RocketMQ lets a broker
    set mappedFileSizeConsumeQueue; the commit log size is found from the files already)."""
    run = java_master_run(version, "SYNC_MASTER", interop_root, namesrv)
    inspect = subprocess.run(
        [sys.executable, "-m", "rocketha", "inspect", str(run.java_store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert inspect.returncode == 0, inspect.stdout[-2000:] + inspect.stderr[-2000:]
    assert f"{N + 1} records, every CRC verified" in inspect.stdout


# -- b. rocketha master -> RocketMQ slave ------------------------------------------------------


def rocketha_messages(n: int, seed: int, topic: str) -> list[Message]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = 40_000 if i % 97 == 0 else rng.randint(0, 12_000)
        out.append(
            Message(topic, rng.randbytes(size), tags=f"t{i % 3}", keys=f"k{i}", queue_id=i % 4)
        )
    return out


@pytest.mark.parametrize(
    ("version", "role", "from_last_file"),
    [
        (VERSION_4, "SYNC_MASTER", False),
        (VERSION_4, "ASYNC_MASTER", True),
        (VERSION_5, "SYNC_MASTER", False),
        (VERSION_5, "ASYNC_MASTER", True),
    ],
)
def test_rocketha_master_to_rocketmq_slave(
    version: str, role: str, from_last_file: bool, workdir: Path
) -> None:
    rmq = resolve(version)
    msgs = rocketha_messages(700, seed=3, topic="OursT")
    config = BrokerConfig(
        broker_role=role,
        store_path_root_dir=str(workdir / "rocketha-master"),
        mapped_file_size_commit_log=SEG,
        mapped_file_size_consume_queue=CQ_BYTES,
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        sync_from_last_file=from_last_file,
        **(FAST_HA_OURS if from_last_file else {}),  # type: ignore[arg-type]
    )
    with Broker(config) as master:
        # Before the slave: about 1.9 segments (a SYNC_MASTER answers SLAVE_NOT_AVAILABLE).
        before = master.put_batch(msgs[:300])
        alone = PutStatus.SLAVE_NOT_AVAILABLE if role == "SYNC_MASTER" else PutStatus.PUT_OK
        assert {r.status for r in before} == {alone}
        at_connect = master.max_offset
        last_file = at_connect - at_connect % SEG
        slave_conf = {
            "brokerName": f"ours-{rmq.major}{role[0]}",
            "brokerRole": "SLAVE",
            "brokerId": 1,
            "haMasterAddress": master.ha_address,
            "mappedFileSizeConsumeQueue": CQ_BYTES,
            **(FAST_HA if from_last_file else {}),
        }
        java = rmq.broker(workdir / "java-slave", **slave_conf)
        try:

            def acked() -> int:
                conns = master.ha_status()["connections"]
                return max((c["slave_ack_offset"] for c in conns), default=-1)

            wait_for(lambda: acked() >= at_connect, 60, "the RocketMQ slave to catch up")
            after = []
            if from_last_file:
                # Killed, missing 100 puts, restarted on its store: RocketMQ's slave recovers,
                # reports its own max offset, and our master resumes from there.
                java.kill()
                wait_for(lambda: not master.ha_status()["connections"], 30, "the link to close")
                after += [master.put(m) for m in msgs[300:400]]
                java = rmq.broker(workdir / "java-slave", **slave_conf)
                wait_for(lambda: acked() >= at_connect, 60, "the restarted slave to report")
            after += [master.put(m) for m in msgs[len(before) + len(after) :]]
            end = master.max_offset
            start = last_file if from_last_file else 0
            held = sum(r.offset >= start for r in before + after)
            wait_for(lambda: acked() == end, 60, f"the RocketMQ slave to ack {end}")
            # RocketMQ's consume queues after its SIGKILL are its own recovery's business (see
            # below); its commit log must hold every byte either way.
            wait_for(
                lambda: (
                    log_end(java.store) == end and (from_last_file or entries(java.store) == held)
                ),
                30,
                "RocketMQ's files",
            )
            if from_last_file:
                link = master.ha_status()["connections"]
                time.sleep(IDLE)  # the idle period under test, not a wait for readiness
                # The same single link, kept up by RocketMQ's reports and our heartbeats.
                assert master.ha_status()["connections"][0]["since"] == link[0]["since"]
                assert len(master.ha_status()["connections"]) == 1
                assert acked() == end
        finally:
            java.kill()
        ours = consume_queues(Path(config.store_path_root_dir))

    # A SYNC_MASTER answers PUT_OK only on the RocketMQ slave's acks.
    assert [r.status for r in after] == [PutStatus.PUT_OK] * len(after)
    java_files = [int(p.name) for p in log_segments(java.store)]
    assert java_files[0] == start, f"RocketMQ's slave starts at {java_files[0]}, expected {start}"
    assert end - start > 2 * SEG
    assert_same_log(java.store, Path(config.store_path_root_dir), start, end)
    # RocketMQ's slave indexes what it holds; a slave started at the last file has the later
    # part of every queue, at the same queue offsets.
    theirs = consume_queues(java.store)
    assert set(theirs) <= set(ours) if from_last_file else sorted(theirs) == sorted(ours)
    for key, queue in ours.items():
        want = {q: e for q, e in queue.items() if e[0] >= start}
        if from_last_file:
            # RocketMQ's slave, SIGKILLed early in a transfer that began past queue offset 0 and
            # restarted, sometimes renumbers a queue from 0 (4.9.7) or does not index all of it
            # within 30 s (5.4.0), about 1 run in 6 here: its consume queue recovery, not the
            # replicated bytes, which are compared above. Every entry it holds must be ours.
            assert set(theirs[key].values()) <= set(want.values()), key
        else:
            assert theirs[key] == want, key
    log = java.logs()
    assert "master pushed offset not equal" not in log


# -- c. RocketMQ serves a store rocketha wrote -------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_rocketmq_serves_a_store_rocketha_wrote(
    version: str, workdir: Path, namesrv: NameServer
) -> None:
    rmq = resolve(version)
    topic = f"OursServedT{rmq.major}"
    store = workdir / "store"
    msgs = rocketha_messages(600, seed=4, topic=topic)
    with MessageStore(
        store, mapped_file_size_commit_log=SEG, mapped_file_size_consume_queue=CQ_ENTRIES * 20
    ) as ms:
        results = ms.put_batch(msgs)
        assert ms.max_offset > 3 * SEG
    java = rmq.broker(
        workdir / "java",
        namesrv,
        brokerName=f"served-{rmq.major}",
        storePathRootDir=store,
        mappedFileSizeConsumeQueue=CQ_BYTES,
    )
    try:
        got = rmq.consume(
            namesrv.address, topic, len(msgs), home=workdir / "consumer", broker=java.address
        )
        # rocketha's index files answer RocketMQ's lookups: mqadmin queryMsgByKey asks the
        # Java broker, which loaded them from the store.
        found = rmq.mqadmin(
            workdir, "queryMsgByKey", "-t", topic, "-k", "k5", "-n", namesrv.address
        )
    finally:
        java.kill()
    assert results[5].msg_id in found and results[6].msg_id not in found, found
    want = {
        (m.queue_id, r.queue_offset): (r.offset, len(m.body), zlib.crc32(m.body), m.tags)
        for m, r in zip(msgs, results, strict=True)
    }
    seen = {
        (g.queue_id, g.queue_offset): (g.commit_log_offset, g.body_len, g.body_crc, g.tags)
        for g in got
    }
    # Which offsets of which queues never came, if any: a stuck queue and a skipped range
    # look different here, and the count alone says neither.
    missing = sorted(set(want) - set(seen))
    assert not missing, {q: [o for qq, o in missing if qq == q] for q in {q for q, _ in missing}}
    assert len(got) == len(msgs)
    assert seen == want
