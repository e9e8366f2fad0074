"""Replication between real processes on 127.0.0.1: convergence, restarts, bad peers, auth."""

from __future__ import annotations

import logging
import os
import random
import socket
import struct
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import SEGMENT, same_log, start_slave, wait_for
from rocketha import Broker, BrokerConfig, Message, MessageStore


def master_config(tmp: Path, **kw: object) -> BrokerConfig:
    return BrokerConfig(
        broker_role=kw.pop("broker_role", "ASYNC_MASTER"),
        store_path_root_dir=str(tmp / "master"),
        mapped_file_size_commit_log=SEGMENT,
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        **kw,
    )


def random_messages(n: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        roll = rng.random()
        # Mostly small; some larger than haTransferBatchSize (32 KiB); sizes that hit segment ends.
        size = rng.randint(33_000, 40_000) if roll < 0.003 else rng.randint(0, 600)
        out.append(Message(f"T{i % 5}", rng.randbytes(size), tags=f"t{i % 3}", queue_id=i % 4))
    return out


def acked(master: Broker) -> list[int]:
    assert master.ha is not None
    return sorted(master.ha.slave_ack_offsets())


def queues_of(path: Path) -> list:
    with MessageStore(path, mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        return s.queues()


def test_two_slaves_converge_byte_identical_with_100k_messages(tmp_path: Path) -> None:
    msgs = random_messages(100_000, seed=1)
    with Broker(master_config(tmp_path)) as master:
        master.put_batch(msgs[:30_000])
        slaves = [
            start_slave(tmp_path, f"s{i}", master.ha_address, brokerId=i + 1) for i in range(2)
        ]
        try:
            for i in range(30_000, 100_000, 1000):
                master.put_batch(msgs[i : i + 1000])
            target = master.max_offset
            wait_for(lambda: acked(master) == [target, target], 120, "both slaves to ack")
            assert len(master.store.segments()) > 50
        finally:
            for s in slaves:
                assert s.stop() == 0
    for i in range(2):
        assert same_log(tmp_path / "master", tmp_path / f"s{i}")
        assert queues_of(tmp_path / f"s{i}") == queues_of(tmp_path / "master")


def test_killed_slave_resumes_from_its_own_max_offset(tmp_path: Path) -> None:
    msgs = random_messages(20_000, seed=2)
    with Broker(master_config(tmp_path)) as master:
        slave = start_slave(tmp_path, "s", master.ha_address)
        master.put_batch(msgs[:10_000])
        wait_for(lambda: acked(master) and acked(master)[0] > 0, 60, "some replication")
        slave.kill()
        master.put_batch(msgs[10_000:])
        with MessageStore(tmp_path / "s", mapped_file_size_commit_log=SEGMENT) as recovered:
            resumed_from = recovered.max_offset
        assert 0 < resumed_from < master.max_offset
        slave = start_slave(tmp_path, "s", master.ha_address)
        try:
            target = master.max_offset
            wait_for(lambda: acked(master) == [target], 60, "the restarted slave to catch up")
            starts = [c["next_transfer_from"] for c in master.ha.connections()]  # type: ignore[union-attr]
            assert starts and starts[0] >= resumed_from
        finally:
            assert slave.stop() == 0
    assert same_log(tmp_path / "master", tmp_path / "s")


@pytest.mark.parametrize("last_file_only", [False, True])
def test_empty_slave_gets_full_history_or_last_segment(
    tmp_path: Path, last_file_only: bool
) -> None:
    with Broker(master_config(tmp_path, sync_from_last_file=last_file_only)) as master:
        while len(master.store.segments()) < 3:
            master.put_batch([Message("T", os.urandom(1000)) for _ in range(20)])
        last_start = master.store.segments()[-1][1]
        slave = start_slave(tmp_path, "s", master.ha_address)
        try:
            target = master.max_offset
            wait_for(lambda: acked(master) == [target], 60, "catch-up")
        finally:
            assert slave.stop() == 0
    with MessageStore(tmp_path / "s", mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        assert s.min_offset == (last_start if last_file_only else 0)
        assert s.max_offset == target
    if not last_file_only:
        assert same_log(tmp_path / "master", tmp_path / "s")


def test_bad_peers_do_not_hurt_the_healthy_slave(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rocketha.ha")
    with Broker(master_config(tmp_path)) as master:
        assert master.ha is not None
        slave = start_slave(tmp_path, "s", master.ha_address)
        try:
            master.put_batch([Message("T", b"x" * 100) for _ in range(1000)])
            host, port = "127.0.0.1", master.ha_listen_port
            wait_for(lambda: len(master.ha.connections()) == 1, 30, "the healthy slave")

            def peer(payload: bytes, linger: float = 0.0) -> None:
                with socket.create_connection((host, port)) as s:
                    s.sendall(payload)
                    time.sleep(linger)

            peer(os.urandom(64), 0.2)  # garbage: read as offsets, most beyond max or negative
            peer(struct.pack(">q", master.max_offset + 10**9), 0.2)  # ack beyond max offset
            peer(struct.pack(">q", -5), 0.2)  # negative offset
            peer(b"\x00\x00\x00", 0.0)  # half a report, then close
            for _ in range(200):
                socket.create_connection((host, port)).close()
            master.put_batch([Message("T", b"y" * 100) for _ in range(1000)])
            target = master.max_offset
            wait_for(lambda: acked(master) == [target], 60, "the healthy slave to keep up")
            wait_for(lambda: len(master.ha.connections()) == 1, 30, "bad connections to close")
        finally:
            assert slave.stop() == 0
    assert "beyond the master's max offset" in caplog.text
    assert "negative" in caplog.text
    assert same_log(tmp_path / "master", tmp_path / "s")


@pytest.mark.parametrize("slave_secret", [None, "wrong"])
def test_wrong_or_missing_secret_gets_zero_log_bytes(
    tmp_path: Path, slave_secret: str | None
) -> None:
    with Broker(master_config(tmp_path, ha_auth_secret="right")) as master:
        assert master.ha is not None
        master.put_batch([Message("T", b"x" * 100) for _ in range(100)])
        keys = {"haAuthSecret": slave_secret} if slave_secret else {}
        slave = start_slave(tmp_path, "s", master.ha_address, **keys)
        try:
            wait_for(
                lambda: any(e == "SHUTDOWN" for e in master.ha._states.values()), 30, "refusal"
            )
            assert all(c["bytes_sent"] <= 36 + 32 for c in master.ha.connections())
        finally:
            slave.stop()
    with MessageStore(tmp_path / "s", mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        assert s.max_offset == 0


def test_right_secret_replicates(tmp_path: Path) -> None:
    with Broker(master_config(tmp_path, ha_auth_secret="right")) as master:
        master.put_batch([Message("T", b"x" * 100) for _ in range(100)])
        slave = start_slave(tmp_path, "s", master.ha_address, haAuthSecret="right")
        try:
            target = master.max_offset
            wait_for(lambda: acked(master) == [target], 30, "replication")
            assert [c["authenticated"] for c in master.ha.connections()] == [True]  # type: ignore[union-attr]
        finally:
            assert slave.stop() == 0
    assert same_log(tmp_path / "master", tmp_path / "s")


def test_frame_crc_extension_replicates(tmp_path: Path) -> None:
    with Broker(master_config(tmp_path, ha_auth_secret="k")) as master:
        master.put_batch(random_messages(3000, seed=3))
        slave = start_slave(tmp_path, "s", master.ha_address, haAuthSecret="k", haTransferCrc=True)
        try:
            target = master.max_offset
            wait_for(lambda: acked(master) == [target], 60, "replication with CRC frames")
        finally:
            assert slave.stop() == 0
    assert same_log(tmp_path / "master", tmp_path / "s")


def test_crc_without_secret_is_a_config_error(tmp_path: Path) -> None:
    from rocketha import ConfigError

    with pytest.raises(ConfigError, match="haTransferCrc"):
        BrokerConfig(
            broker_role="SLAVE", broker_id=1, ha_master_address="h:1", ha_transfer_crc=True
        )


def _log_bytes(path: Path) -> bytes:
    with MessageStore(path, mapped_file_size_commit_log=SEGMENT, read_only=True) as s:
        out, offset = b"", s.min_offset
        while offset < s.max_offset:
            chunk = bytes(s.read_raw(offset, 1 << 20))
            out += chunk
            offset += len(chunk)
        return out


def test_divergent_slave_is_detected_not_written_and_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil
    import subprocess
    import sys

    caplog.set_level(logging.INFO, logger="rocketha.ha")
    shared = random_messages(500, seed=4)
    with Broker(master_config(tmp_path)) as master:
        master.put_batch(shared)
        common = master.max_offset
    # The slave once replicated everything up to `common`, then was written to on its own
    # (an old master's tail, or a mistaken producer): seed 003's dirty slave.
    shutil.copytree(tmp_path / "master", tmp_path / "s")
    with MessageStore(tmp_path / "s", mapped_file_size_commit_log=SEGMENT) as dirty:
        dirty.put_batch([Message("Stray", b"not on the master %d" % i) for i in range(30)])
    before = _log_bytes(tmp_path / "s")
    with Broker(master_config(tmp_path)) as master:
        master.put_batch([Message("T", b"new on the master %d" % i) for i in range(30)])
        slave = start_slave(tmp_path, "s", master.ha_address)
        try:
            wait_for(lambda: (tmp_path / "s" / "divergence").exists(), 30, "divergence detection")
        finally:
            slave.stop()
        assert _log_bytes(tmp_path / "s") == before, "a divergent slave is not written to"
        marker = (tmp_path / "s" / "divergence").read_text()
        # The first differing byte lies inside the first record the two logs do not share.
        parted = int(marker.split()[0].removeprefix("offset="))
        assert common <= parted < common + 91 + 40
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "rocketha",
                "repair",
                "--truncate-to-common-prefix",
                str(tmp_path / "s"),
            ],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        assert f"to offset {common}" in out.stdout
        slave = start_slave(tmp_path, "s", master.ha_address)
        try:
            target = master.max_offset
            wait_for(lambda: acked(master) == [target], 60, "replication after repair")
        finally:
            assert slave.stop() == 0
    assert same_log(tmp_path / "master", tmp_path / "s")


def test_slave_stops_on_a_record_that_keeps_failing_validation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A master whose log holds a record with BODYCRC 0 (rocketmq-rust's batch encoder leaves
    it unset): the slave refuses it, stops after a few tries instead of reconnecting forever,
    says where, why and from whom, and replicates once told to accept a BODYCRC of 0."""
    import subprocess
    import sys

    caplog.set_level(logging.INFO, logger="rocketha.ha")
    with MessageStore(tmp_path / "master", mapped_file_size_commit_log=SEGMENT) as store:
        results = store.put_batch([Message("T", b"body %d" % i + b"." * 300) for i in range(300)])
    bad = results[120].offset
    start = bad - bad % SEGMENT
    with (tmp_path / "master" / "commitlog" / f"{start:020d}").open("r+b") as f:
        f.seek(bad - start + 8)
        f.write(b"\0\0\0\0")

    def slave_config(name: str, **kw: object) -> BrokerConfig:
        return BrokerConfig(
            broker_role="SLAVE",
            broker_id=1,
            store_path_root_dir=str(tmp_path / name),
            mapped_file_size_commit_log=SEGMENT,
            ha_master_address=master.ha_address,
            ha_listen_address="127.0.0.1",
            ha_listen_port=0,
            listen_port=0,
            **kw,
        )

    # The master itself opens such a log only with the opt-in (or recovery refuses it).
    with Broker(master_config(tmp_path, ha_accept_zero_body_crc=True)) as master:
        with Broker(slave_config("s", metrics_port=0)) as slave:
            assert slave.ha is not None
            assert slave.ha.wait_for_state(None, "STOPPED", 30)
            status = slave.ha_status()
            assert status["state"] == "STOPPED"
            stop = status["stopped"]
            assert stop["offset"] == bad and stop["master"] == master.ha_address
            assert "body CRC mismatch: stored 0x0" in stop["reason"]
            # Nothing of the refused frame is written: the slave ends before the bad record.
            assert 0 < slave.max_offset <= bad
            connects = status["connects"]
            time.sleep(1.0)
            assert slave.ha_status()["connects"] == connects, "a stopped slave does not retry"
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "rocketha",
                    "status",
                    f"http://127.0.0.1:{slave._metrics.port}",
                ],
                capture_output=True,
                text=True,
            )
            assert out.returncode == 0, out.stderr
            [line] = [x for x in out.stdout.splitlines() if "STOPPED at offset" in x]
            assert f"STOPPED at offset {bad}: " in line
            assert master.ha_address in line and "stored 0x0" in line
            metrics = urllib.request.urlopen(
                f"http://127.0.0.1:{slave._metrics.port}/metrics", timeout=10
            )
            [line] = [
                x
                for x in metrics.read().decode().splitlines()
                if x.startswith("rocketha_ha_replication_stop")
            ]
            assert master.ha_address in line and line.endswith(f" {float(bad)}")

            def stops() -> list[str]:
                messages = [r.getMessage() for r in caplog.records]
                return [m for m in messages if "STOPPED: stopped replicating" in m]

            assert len(stops()) == 1, "logged once"
            assert f"offset {bad}" in stops()[0] and master.ha_address in stops()[0]
            # A config change is the operator action it waits for: it replicates again (and,
            # nothing having changed, stops again at the same record).
            slave.ha.update_master_address(master.ha_address)
            wait_for(lambda: len(stops()) == 2, 30, "the slave to replicate and stop again")
            assert slave.ha_status()["connects"] == connects + 3

        with Broker(slave_config("s", ha_accept_zero_body_crc=True)) as slave:
            target = master.max_offset
            wait_for(lambda: slave.max_offset == target, 30, "replication with the opt-in")

    def raw(store: Path) -> dict[str, bytes]:
        files = sorted((store / "commitlog").iterdir())
        return {f.name: f.read_bytes().rstrip(b"\0") for f in files}

    # Byte for byte, the zero BODYCRC included (a read-only reader would stop at it).
    assert raw(tmp_path / "s") == raw(tmp_path / "master")
