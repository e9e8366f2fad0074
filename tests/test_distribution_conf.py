"""``rocketha broker -c`` with the Apache RocketMQ distribution's own ``2m-2s-sync`` and
``2m-2s-async`` files, unmodified (``tests/fixtures/rocketmq-conf``): one name server and four
brokers as processes, given only what ``mqbroker`` takes on its command line (``-n``) and what
four brokers on one host need (``--set`` ports and store directories; the HA port on loopback,
which rocketha's secure default demands without a shared secret). The slaves find their
masters through the name server; a Producer's messages land on the right slaves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BrokerProcess, create_topic, topic_brokers, wait_for
from rocketha import Message, MessageStore, Producer, SendResult, SendStatus

NamesrvProcess = tuple[subprocess.Popen[str], str]

FIXTURES = Path(__file__).parent / "fixtures" / "rocketmq-conf"
#: Masters first: a slave starts with its master's route already registered.
BROKERS = ("broker-a", "broker-b", "broker-a-s", "broker-b-s")
#: The distribution's files leave mappedFileSizeCommitLog at RocketMQ's default.
COMMIT_LOG_FILE_SIZE = 1024 * 1024 * 1024


def start(tmp: Path, mode: str, name: str, namesrv: str) -> BrokerProcess:
    conf = tmp / f"{name}.properties"
    shutil.copyfile(FIXTURES / mode / conf.name, conf)
    overrides = [f"storePathRootDir={tmp / name}", "listenPort=0"]
    if not name.endswith("-s"):
        overrides += ["haListenPort=0", "haListenAddress=127.0.0.1"]
    return BrokerProcess(conf, "-n", namesrv, *(f"--set={kv}" for kv in overrides))


def bodies(store: Path) -> set[bytes]:
    with MessageStore(store, mapped_file_size_commit_log=COMMIT_LOG_FILE_SIZE, read_only=True) as s:
        s.refresh()
        return {m.body for m in s.messages()}


def test_the_distribution_files_are_rocketmqs_unchanged() -> None:
    for mode in ("2m-2s-sync", "2m-2s-async"):
        for name in BROKERS:
            lines = (FIXTURES / mode / f"{name}.properties").read_text().splitlines()
            assert lines[0].startswith(f"# apache/rocketmq distribution/conf/{mode}/{name}.")
            keys = [line.split("=", 1)[0] for line in lines[1:]]
            assert keys == [
                "brokerClusterName",
                "brokerName",
                "brokerId",
                "deleteWhen",
                "fileReservedTime",
                "brokerRole",
                "flushDiskType",
            ]


@pytest.mark.parametrize("mode", ["2m-2s-sync", "2m-2s-async"])
def test_two_masters_two_slaves_from_the_distribution_files(
    tmp_path: Path, namesrv_process: NamesrvProcess, mode: str
) -> None:
    _, namesrv = namesrv_process
    brokers: list[BrokerProcess] = []
    try:
        for name in BROKERS:
            brokers.append(start(tmp_path, mode, name, namesrv))
        for master in brokers[:2]:
            create_topic(master.started["listen_address"], "DistTopic")
        wait_for(lambda: topic_brokers(namesrv, "DistTopic") == 2, what="DistTopic's route")
        with Producer(namesrv, "distribution-producer") as producer:
            # Until each slave has connected, a SYNC_MASTER answers SLAVE_NOT_AVAILABLE.
            ok: dict[str, SendResult] = {}

            def both_groups_ok() -> bool:
                r = producer.send(Message("DistTopic", b"probe"))
                if r.status is SendStatus.SEND_OK:
                    ok[r.queue.broker_name] = r
                return len(ok) == 2

            wait_for(both_groups_ok, what="SEND_OK from broker-a and broker-b")
            results = [producer.send(Message("DistTopic", b"m%d" % i)) for i in range(20)]
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        by_group = {
            group: {b"m%d" % i for i, r in enumerate(results) if r.queue.broker_name == group}
            for group in ("broker-a", "broker-b")
        }
        assert by_group["broker-a"] and by_group["broker-b"], "both groups took messages"
        for group, sent in by_group.items():
            other = ({"broker-a", "broker-b"} - {group}).pop()
            # An ASYNC_MASTER answers before its slave has the message.
            wait_for(
                lambda g=group, s=sent: s <= bodies(tmp_path / f"{g}-s"),
                what=f"{group}'s messages on its slave",
            )
            assert not sent & bodies(tmp_path / f"{other}-s"), f"{group}'s on {other}'s slave"
    finally:
        for broker in reversed(brokers):
            broker.stop()


def rocketha_broker(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    conf = FIXTURES / "2m-2s-sync" / "broker-a.properties"
    environ = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return subprocess.run(
        [sys.executable, "-m", "rocketha", "broker", "-c", str(conf), *args],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=60,
    )


def test_print_config_shows_the_file_with_n_set_and_the_environment() -> None:
    done = rocketha_broker("-p", "--set", "listenPort=10921", env={"NAMESRV_ADDR": "10.0.0.1:9876"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert {"brokerRole=SYNC_MASTER", "listenPort=10921", "namesrvAddr=10.0.0.1:9876"} <= set(lines)
    # Retention is RocketMQ's: the distribution's keys are taken, not ignored.
    assert {"deleteWhen=04", "fileReservedTime=48"} <= set(lines)
    # -n wins over the environment, as mqbroker's -n does.
    done = rocketha_broker("-p", "-n", "10.0.0.2:9876", env={"NAMESRV_ADDR": "10.0.0.1:9876"})
    assert "namesrvAddr=10.0.0.2:9876" in done.stdout.splitlines()


def test_bad_overrides_are_named() -> None:
    done = rocketha_broker("-p", "--set", "listenPort")
    assert done.returncode == 2
    assert "'listenPort' is not key=value" in done.stderr
    done = rocketha_broker("-p", "--set", "listenPrt=1")
    assert done.returncode == 2
    assert "unknown key 'listenPrt'; did you mean 'listenPort'?" in done.stderr


def test_a_slave_refuses_another_groups_master(
    tmp_path: Path, namesrv_process: NamesrvProcess
) -> None:
    """broker-b's slave given broker-a's master as haMasterAddress (what the shipped slave
    files once said) replicates nothing and says why, naming both; told its own master's
    address, the one the name server confirms, it replicates."""
    _, namesrv = namesrv_process
    brokers = [start(tmp_path, "2m-2s-sync", name, namesrv) for name in ("broker-a", "broker-b")]
    a_ha, b_ha = (f"127.0.0.1:{b.started['ha_listen_port']}" for b in brokers)
    conf = tmp_path / "broker-b-s.properties"
    shutil.copyfile(FIXTURES / "2m-2s-sync" / conf.name, conf)

    def slave(ha_master: str, store: str) -> BrokerProcess:
        sets = [f"storePathRootDir={tmp_path / store}", "listenPort=0", "metricsPort=0"]
        sets.append(f"haMasterAddress={ha_master}")
        return BrokerProcess(conf, "-n", namesrv, *(f"--set={kv}" for kv in sets))

    try:
        for master in brokers:
            create_topic(master.started["listen_address"], "OwnTopic")
        with Producer(namesrv, "identity-producer") as producer:
            wait_for(lambda: topic_brokers(namesrv, "OwnTopic") == 2, what="OwnTopic's route")
            for i in range(20):
                producer.send(Message("OwnTopic", b"m%d" % i))
        wrong = slave(a_ha, "wrong")
        try:
            refusal = wait_for(
                lambda: "refusing to replicate" in wrong.stderr() and wrong.stderr(),
                what="the slave's refusal",
            )
            assert f"haMasterAddress={a_ha} is not the master of this slave's group broker-b" in (
                refusal
            )
            assert f"the name server names {b_ha} as broker broker-b's master" in refusal
            url = f"http://127.0.0.1:{wrong.started['metrics_port']}"
            status = subprocess.run(
                [sys.executable, "-m", "rocketha", "status", url],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert "not replicating" in status and "refusing to replicate" in status, status
        finally:
            wrong.stop()
        assert bodies(tmp_path / "wrong") == set(), "no byte of broker-a's log on broker-b's slave"
        right = slave(b_ha, "right")
        try:
            wait_for(lambda: len(bodies(tmp_path / "right")) > 0, what="broker-b's log replicated")
            assert "is broker broker-b's master, as the name server confirms" in right.stderr()
        finally:
            right.stop()
        assert bodies(tmp_path / "right") == bodies(tmp_path / "broker-b")
    finally:
        for broker in reversed(brokers):
            broker.stop()
