"""SIGKILL of a master under load and of either side mid-append: nothing acknowledged is lost,
recovery keeps a valid prefix, and the replica converges byte for byte after restarts."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

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
from helpers import same_log, start_slave


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
