"""Network faults between slave and master through :mod:`proxy`: every fault must end in
convergence or a clear, logged error, and never in a byte on the slave that the master's log
does not hold at that offset."""

from __future__ import annotations

import random
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from common import HA_TIMERS, FaultReport, converges, is_log_prefix, replica_max_offset
from helpers import SEGMENT, same_log, start_slave
from proxy import CutAfter, Delay, Fault, FaultProxy, FlipByte, Rechunk, StallAfter
from rocketha import Broker, BrokerConfig, Message

#: What a slave logs when it refuses a frame: the clear errors a fault may end in.
CLEAR_ERRORS = ("bad frame from master", "master pushed offset not equal")


def master_config(tmp: Path) -> BrokerConfig:
    return BrokerConfig(
        broker_role="ASYNC_MASTER",
        store_path_root_dir=str(tmp / "master"),
        mapped_file_size_commit_log=SEGMENT,
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        ha_send_heartbeat_interval=HA_TIMERS["haSendHeartbeatInterval"],
        ha_housekeeping_interval=HA_TIMERS["haHousekeepingInterval"],
    )


Bodies = Callable[[random.Random], bytes]


def random_bodies(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 2000))


def batch(rng: random.Random, bodies: Bodies, n: int = 100) -> list[Message]:
    return [Message(f"T{i % 3}", bodies(rng)) for i in range(n)]


def replicate_through(
    tmp: Path, fault: Fault, rng: random.Random, bodies: Bodies
) -> tuple[bool, bool, str]:
    """Master in-process, slave in a child process behind the proxy; about 1.5 MB before the
    slave connects and more while it catches up. Returns (converged, prefix, slave log)."""
    with Broker(master_config(tmp)) as master:
        assert master.ha is not None
        for _ in range(15):
            master.put_batch(batch(rng, bodies))
        proxy = FaultProxy(master.ha_address, fault)
        slave = start_slave(tmp, "s", proxy.address, **HA_TIMERS)
        try:
            for _ in range(5):
                master.put_batch(batch(rng, bodies))
            target = master.max_offset
            acks = master.ha.slave_ack_offsets
            # Stop early once the slave holds a byte the master does not: it cannot heal.
            converges(
                lambda: target in acks() or not written_prefix(tmp / "s", tmp / "master"),
                30,
                "convergence or corruption",
            )
            converged = target in acks()
        finally:
            slave.proc.send_signal(signal.SIGTERM)
            slave.proc.wait(timeout=30)
            log = slave.stderr()
            slave.stop()
            proxy.close()
    prefix = is_log_prefix(tmp / "s", tmp / "master")
    return converged and same_log(tmp / "master", tmp / "s"), prefix, log


def written_prefix(replica: Path, master: Path) -> bool:
    """``is_log_prefix`` of a replica still writing, bounded by its valid end read first."""
    return is_log_prefix(replica, master, upto=replica_max_offset(replica))


def check(
    tmp: Path,
    name: str,
    make: Callable[[random.Random], Fault],
    trials: int,
    report: FaultReport,
    bodies: Bodies = random_bodies,
) -> None:
    rng = random.Random()
    for trial in range(trials):
        fault = make(rng)
        converged, prefix, log = replicate_through(tmp / f"trial{trial}", fault, rng, bodies)
        if isinstance(fault, FlipByte):
            assert fault.flipped, f"{name}: the proxy never found the byte to flip"
        clear_error = any(e in log for e in CLEAR_ERRORS)
        error = clear_error and not converged
        report.trial(f"c. {name}", corrupt=not prefix, converged=converged, error=error)
        assert prefix, f"{name}: the slave wrote bytes the master's log does not hold"
        assert converged or clear_error, f"{name}: neither converged nor a clear error:\n{log}"


FAULTS: dict[str, Callable[[random.Random], Fault]] = {
    "cut mid-frame": lambda rng: CutAfter(rng.randint(1, 500_000)),
    "stall past housekeeping": lambda rng: StallAfter(rng.randint(1, 500_000), 1.6),
    "delay every packet": lambda rng: Delay(rng.uniform(0.001, 0.01)),
    "re-chunk stream": lambda rng: Rechunk(rng),
    # Offset bytes: a low one (off by 256) and the sign bit; the slave must refuse the frame.
    "flip header offset byte": lambda rng: FlipByte(3, 0x01, header_at=6),
    "flip header offset sign": lambda rng: FlipByte(3, 0x80, header_at=0),
    # Size bytes: negative, and a 32 KiB body announced as 0 bytes.
    "flip header size sign": lambda rng: FlipByte(3, 0x80, header_at=8),
    "flip header size to zero": lambda rng: FlipByte(3, 0x80, header_at=10),
    # A body announced larger than sent: the next header would be taken as log bytes.
    "flip header size grows": lambda rng: FlipByte(3, 0x10, header_at=11),
}


@pytest.mark.parametrize(
    "name",
    list(FAULTS),
)
def test_network_fault(
    tmp_path: Path, name: str, long_run: bool, fault_report: FaultReport
) -> None:
    check(tmp_path, name, FAULTS[name], 5 if long_run else 1, fault_report)


#: The byte message bodies are made of in the flipped-body test.
FILLER = 0xAB


def test_flipped_body_byte_is_detected(
    tmp_path: Path, long_run: bool, fault_report: FaultReport
) -> None:
    check(
        tmp_path,
        "flip body byte",
        lambda rng: FlipByte(
            3, 0xFF, header_at=None, body_at=rng.randint(0, 30_000), inside=FILLER
        ),
        5 if long_run else 1,
        fault_report,
        # Bodies of one byte value, so the flip lands in a body: see FlipByte.
        bodies=lambda rng: bytes([FILLER]) * rng.randint(FlipByte.RUN + 1, 2000),
    )
