"""SIGKILL of a master under load and of either side mid-append: nothing acknowledged is lost,
recovery keeps a valid prefix, and the replica converges byte for byte after restarts."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from common import (
    HA_TIMERS,
    FaultReport,
    ProducerProcess,
    converges,
    is_log_prefix,
    lost_acks,
    recover_and_count_corrupt,
    replica_max_offset,
)
from helpers import same_log, start_master, start_slave
from rocketha import MessageStore, NameServer, _children

from benches.peers.rocketmq import VERSION_5, RocketMQ, Unavailable, missing_tools


def sync_master_kill_trial(d: Path, rng: random.Random, report: FaultReport) -> None:
    master = ProducerProcess(d / "master", role="SYNC_MASTER")
    slave = start_slave(d, "s", master.ha_address, **HA_TIMERS)
    try:
        # The kill lands after a random number of acks, at no particular point of a put.
        master.wait_acks(rng.randint(1, 400))
    finally:
        master.kill()
        slave.stop()
    lost = lost_acks(master.acks, d / "s")
    prefix = is_log_prefix(d / "s", d / "master")
    corrupt = recover_and_count_corrupt(d / "s")
    report.trial(
        "a. master SIGKILL, SYNC_MASTER",
        acked_lost=lost,
        corrupt=corrupt + (not prefix),
        converged=prefix and not lost,
    )
    assert lost == 0, f"{d.name}: {lost} of {len(master.acks)} acked messages lost"
    assert prefix, f"{d.name}: the slave's log is not a prefix of the master's"
    assert corrupt == 0


def test_master_sigkill_under_sync_master_load_loses_no_acked_message(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    rng = random.Random()
    for trial in range(50 if long_run else 5):
        sync_master_kill_trial(tmp_path / f"trial{trial}", rng, fault_report)
        shutil.rmtree(tmp_path / f"trial{trial}")


def mid_append_kill_trial(d: Path, rng: random.Random, report: FaultReport) -> None:
    victim = rng.choice(["master", "slave"])
    master = first = ProducerProcess(d / "master", role="ASYNC_MASTER", threads=2)
    slave = start_slave(d, "s", master.ha_address, **HA_TIMERS)
    try:
        master.wait_acks(rng.randint(1, 3000))
        if victim == "master":
            master.kill()
            slave.stop()
            corrupt = recover_and_count_corrupt(d / "master")
            master = ProducerProcess(d / "master", role="ASYNC_MASTER", threads=0)
        else:
            slave.kill()
            corrupt = recover_and_count_corrupt(d / "s")
        slave = start_slave(d, "s", master.ha_address, **HA_TIMERS)
        target = master.stop_load()
        converged = converges(
            lambda: replica_max_offset(d / "s") == target, 60, "the restarted pair to converge"
        )
    finally:
        slave.stop()
        master.stop()
    # ASYNC_MASTER acks once the record is in the page cache, which a SIGKILL keeps.
    lost = lost_acks(first.acks, d / "master")
    identical = same_log(d / "master", d / "s")
    detail = f"slave at {replica_max_offset(d / 's')}, master at {target}, same log: {identical}"
    converged = converged and identical
    report.trial(
        f"b. {victim} SIGKILL mid-append", acked_lost=lost, corrupt=corrupt, converged=converged
    )
    assert corrupt == 0, f"{d.name}: a CRC-failing record survived {victim} recovery"
    assert lost == 0, f"{d.name}: {lost} acked messages lost"
    assert converged, f"{d.name}: no byte-identical log after the {victim} restart: {detail}"


def test_sigkill_mid_append_recovers_and_converges(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    rng = random.Random()
    for trial in range(100 if long_run else 10):
        mid_append_kill_trial(tmp_path / f"trial{trial}", rng, fault_report)
        shutil.rmtree(tmp_path / f"trial{trial}")


#: A producer process's command, given the name server, and what one line it printed says:
#: the UNIQ_KEY of a message answered SEND_OK, or None.
Client = tuple[Callable[[str], list[str]], Callable[[str], str | None]]


def python_client() -> Client:
    """``rocketha produce --json``."""

    def command(namesrv: str) -> list[str]:
        produce = ["produce", "--namesrv", namesrv, "--topic", "Kill", "--json"]
        return [sys.executable, "-m", "rocketha", *produce, "--count", "1000000", "--size", "100"]

    def acked(line: str) -> str | None:
        # A send that failed (the master died under it) is a line with "error", not "status".
        r = json.loads(line)
        return str(r["msg_id"]) if r.get("status") == "SEND_OK" else None

    return command, acked


def java_client(rmq: RocketMQ, home: Path) -> Client:
    """Apache RocketMQ's ``DefaultMQProducer`` (its ``msgId`` is the UNIQ_KEY it sets)."""

    def command(namesrv: str) -> list[str]:
        return rmq.producer_command(home, namesrv, "Kill", 1_000_000, 100, "kill-producer")

    def acked(line: str) -> str | None:
        f = line.split()
        return f[3] if f[:1] == ["SENT"] and f[2] == "SEND_OK" else None

    return command, acked


def networked_master_kill_trial(
    d: Path, rng: random.Random, report: FaultReport, client: Client, row: str
) -> None:
    """A producer in another process sends through the name server to a SYNC_MASTER process
    whose slave found it through the name server; the master is SIGKILLed after a random
    number of SEND_OKs. Every SEND_OK message (by its UNIQ_KEY) must be on the slave."""
    d.mkdir(parents=True)
    command, acked_key = client
    with NameServer("127.0.0.1:0") as ns:
        master = start_master(d, "broker-a", ns.listen_address, **HA_TIMERS)
        ha = f"127.0.0.1:{master.started['ha_listen_port']}"
        slave = start_slave(d, "s", ha, **HA_TIMERS)
        producer = _children.spawn(
            command(ns.listen_address),
            cwd=d,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert producer.stdout is not None
        acked: list[str] = []
        try:
            kill_after = rng.randint(1, 300)
            killed = False
            for line in producer.stdout:
                key = acked_key(line)
                if key is not None:
                    acked.append(key)
                elif killed:
                    # The first failed send after the kill: with no master nothing more is
                    # acked (a producer that reads on after a failure would go on forever).
                    break
                if len(acked) == kill_after and not killed:
                    master.kill()
                    killed = True
            # What the producer printed after the kill, it was answered before the kill.
        finally:
            _children.kill(producer)
            producer.stdout.close()
            master.kill()
            slave.stop()
    with MessageStore(d / "s", read_only=True) as store:
        held = {m.properties.get("UNIQ_KEY") for m in store.messages()}
    lost = len([a for a in acked if a not in held])
    prefix = is_log_prefix(d / "s", d / "broker-a-master")
    report.trial(row, acked_lost=lost, corrupt=not prefix, converged=prefix and not lost)
    assert acked, "nothing was acknowledged before the kill"
    assert lost == 0, f"{d.name}: {lost} of {len(acked)} SEND_OK messages lost"
    assert prefix, f"{d.name}: the slave's log is not a prefix of the master's"


def test_master_sigkill_under_networked_sync_master_load_loses_no_send_ok(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    rng = random.Random()
    for trial in range(50 if long_run else 3):
        networked_master_kill_trial(
            tmp_path / f"trial{trial}",
            rng,
            fault_report,
            python_client(),
            "a. master SIGKILL, networked SYNC_MASTER",
        )
        shutil.rmtree(tmp_path / f"trial{trial}")


@pytest.mark.interop
def test_master_sigkill_under_java_producer_load_loses_no_send_ok(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    """The same with Apache RocketMQ's Java producer: its SEND_OK, too, is on the slave."""
    why = missing_tools()
    if why:
        pytest.skip(f"Apache RocketMQ interop {why}")
    try:
        rmq = RocketMQ.resolve(VERSION_5)
    except Unavailable as e:
        pytest.fail(str(e))
    rng = random.Random()
    for trial in range(50 if long_run else 2):
        d = tmp_path / f"trial{trial}"
        networked_master_kill_trial(
            d,
            rng,
            fault_report,
            java_client(rmq, d / "java"),
            "a. master SIGKILL, networked, Java producer",
        )
        shutil.rmtree(d)
