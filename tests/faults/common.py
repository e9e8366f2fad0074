"""Helpers shared by the fault tests: a loaded master in a child process, replica checks."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import SEGMENT, wait_for
from rocketha import CommitLogCorrupted, MessageStore, _children

PRODUCER = Path(__file__).with_name("producer.py")
#: Small HA timers so stalls and reconnects play out in a second or two.
HA_TIMERS = {"haSendHeartbeatInterval": 200, "haHousekeepingInterval": 1000}


@dataclass
class ScenarioStats:
    trials: int = 0
    #: Acknowledged messages the trials checked (send or consume scenarios that count them).
    acked: int = 0
    acked_lost: int = 0
    #: Messages delivered again (at-least-once's duplicates).
    redelivered: int = 0
    corrupt: int = 0
    converged: int = 0
    #: Trials that ended in a clear, logged error instead of convergence.
    errors: int = 0


class FaultReport:
    """Per-scenario totals, filled in by the tests and printed at the end of the session."""

    def __init__(self) -> None:
        self.rows: dict[str, ScenarioStats] = {}

    def trial(
        self,
        scenario: str,
        *,
        acked: int = 0,
        acked_lost: int = 0,
        redelivered: int = 0,
        corrupt: int = 0,
        converged: bool = False,
        error: bool = False,
    ) -> None:
        row = self.rows.setdefault(scenario, ScenarioStats())
        row.trials += 1
        row.acked += acked
        row.acked_lost += acked_lost
        row.redelivered += redelivered
        row.corrupt += corrupt
        row.converged += converged
        row.errors += error


class ProducerProcess:
    """``producer.py``: a master broker under load in a child process (see its docstring)."""

    def __init__(self, store: Path, *, role: str, threads: int = 4) -> None:
        self.store = store
        # A log file, not a pipe nobody drains, so a chatty child never blocks on stderr.
        self.log = store.parent / f"{store.name}.log"
        store.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as log:
            self.proc = _children.spawn(
                [sys.executable, PRODUCER, f"--store={store}", f"--role={role}", f"-t{threads}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first:
            self.proc.wait(timeout=30)
            raise AssertionError(f"producer failed to start: {self.log.read_text()}")
        self.ha_address: str = json.loads(first)["ha"]
        #: (offset, sha256 of the body) of every PUT_OK the producer reported.
        self.acks: list[tuple[int, str]] = []
        self._max_offset: list[int] = []
        self._lines = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lines:
                if line.startswith("{"):
                    self._max_offset.append(json.loads(line)["max_offset"])
                elif line.endswith("\n"):
                    offset, digest = line.split()
                    self.acks.append((int(offset), digest))
                self._lines.notify_all()

    def wait_acks(self, n: int, timeout: float = 60) -> None:
        wait_for(lambda: len(self.acks) >= n, timeout, f"{n} acknowledged puts")

    def stop_load(self) -> int:
        """Ends the load; returns the master's max offset, which no longer moves."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        wait_for(lambda: self._max_offset, 60, "the producer to stop")
        return self._max_offset[0]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self._finish()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self._finish()

    def _finish(self) -> int:
        code = self.proc.wait(timeout=60)
        # Everything the producer printed before it died is an acknowledgement a client saw.
        self._reader.join(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        return code


def converges(predicate: Callable[[], Any], timeout: float, what: str) -> bool:
    """``wait_for`` that reports a timeout as False, for outcomes the test tallies."""
    try:
        wait_for(predicate, timeout, what)
    except AssertionError:
        return False
    return True


def open_replica(path: Path) -> MessageStore:
    return MessageStore(path, mapped_file_size_commit_log=SEGMENT, read_only=True)


def lost_acks(acks: list[tuple[int, str]], store: Path) -> int:
    """Acknowledged messages missing from the store at ``store`` or different there."""
    with open_replica(store) as replica:
        held = {m.commitlog_offset: hashlib.sha256(m.body).hexdigest() for m in replica.messages()}
    return sum(held.get(offset) != digest for offset, digest in acks)


def recover_and_count_corrupt(store: Path) -> int:
    """Opens ``store`` for writing (crash recovery) and counts records failing their CRC."""
    with MessageStore(store, mapped_file_size_commit_log=SEGMENT) as recovered:
        try:
            sum(1 for _ in recovered.messages(check_crc=True))
        except CommitLogCorrupted:
            return 1
    return 0


def _segments(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "commitlog").glob("[0-9]" * 20))}


def is_log_prefix(replica: Path, master: Path, upto: int | None = None) -> bool:
    """The replica's segment files hold exactly the master's bytes up to their last non-zero
    byte: raw files, so a corrupt byte anywhere fails, whatever the store API would show.

    A replica still writing needs ``upto``, an offset it had fully written before the call: a
    raw read copies page by page, so it can see a later page written and an earlier one not yet.
    """
    theirs = _segments(master)
    for name, data in _segments(replica).items():
        used = len(data.rstrip(b"\0"))
        if upto is not None:
            used = min(used, max(0, upto - int(name)))
        if used and theirs.get(name, b"")[:used] != data[:used]:
            return False
    return True


def replica_max_offset(path: Path) -> int:
    """The replica's end of complete, valid records, read while its broker writes."""
    if not (path / "commitlog").is_dir():
        return 0
    with open_replica(path) as replica:
        return replica.max_offset
