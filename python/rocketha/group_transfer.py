"""GroupTransferService: how a SYNC_MASTER's asynchronous puts (``Broker.put_async``) learn
that their slaves have them.

Producers add a request (their stored put, how many slaves must ack it, a deadline) to the
*write* list. The service thread swaps it into the *read* list and completes the put's own
future for every request whose record enough distinct slaves have acked (with the result as
stored), or whose deadline passed (marked FLUSH_SLAVE_TIMEOUT), as RocketMQ's GroupCommitRequest
completes its put result. With requests to watch it sleeps in the Rust ack table until an ack
changes or the first deadline; without any it sleeps until a request arrives, so the acks of
blocking puts never wake it. It never polls, and resolves all requests in one pass, so a slow
request never holds back the ones behind it.

A blocking ``Broker.put`` does not go through this thread: it parks on the same Rust ack table
directly and is woken by the ack that covers it, which saves the two GIL handoffs a hop through
this thread costs (see the broker module).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future

from rocketha import _core
from rocketha.roles import PutStatus

log = logging.getLogger("rocketha.group_transfer")

#: Longest sleep without any event, so shutdown is noticed.
_IDLE_WAIT = 1.0


class TransferRequest:
    """One put waiting for ``acks`` distinct slaves to hold ``result.next_offset``."""

    __slots__ = ("acks", "deadline", "future", "result")

    def __init__(self, result: _core.PutResult, acks: int, deadline: float) -> None:
        self.result = result
        self.acks = acks
        self.deadline = deadline
        self.future: Future[_core.PutResult] = Future()

    def finish(self, acked: bool) -> None:
        self.future.set_result(
            self.result if acked else self.result.with_status(PutStatus.FLUSH_SLAVE_TIMEOUT)
        )


class GroupTransferService:
    """Completes each request's ``Future[PutResult]``: the put as stored when acked in time,
    FLUSH_SLAVE_TIMEOUT otherwise (also for requests still waiting at shutdown)."""

    def __init__(self, master: _core.HAMaster) -> None:
        self._master = master
        self._lock = threading.Lock()
        self._requests_write: list[TransferRequest] = []
        self._requests_read: list[TransferRequest] = []
        #: True while the service sleeps with no request to watch, until ``_arrived`` is set.
        self._idle = True
        self._arrived = threading.Event()
        self._running = False
        self._thread: threading.Thread | None = None

    def start(self) -> GroupTransferService:
        self._running = True
        self._thread = threading.Thread(
            target=self._run, name="rocketha-group-transfer", daemon=True
        )
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._running = False
        self._arrived.set()
        self._master.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            pending = self._requests_write + self._requests_read
            self._requests_write, self._requests_read = [], []
        for req in pending:
            if not req.future.done():
                req.finish(False)

    def submit(self, result: _core.PutResult, acks: int, timeout: float) -> Future[_core.PutResult]:
        """Queues a wait for ``acks`` distinct slaves to hold the put ``result``."""
        req = TransferRequest(result, acks, time.monotonic() + timeout)
        with self._lock:
            self._requests_write.append(req)
            wake, self._idle = self._idle, False
        # A busy service picks the request up at the next ack change or earlier deadline (all
        # requests share one timeout, so a new one never expires first); only an idle one
        # needs waking.
        if wake:
            self._arrived.set()
        return req.future

    def _covered(self, acks: int) -> int:
        """The highest offset that at least ``acks`` distinct slaves hold."""
        if acks <= 0:
            return 1 << 62
        offsets = self._master.slave_ack_offsets()  # highest first
        return offsets[acks - 1] if len(offsets) >= acks else -1

    def _swap_requests(self) -> None:
        with self._lock:
            if self._requests_write:
                self._requests_read.extend(self._requests_write)
                self._requests_write = []

    def _run(self) -> None:
        while self._running:
            seen = self._master.ack_version
            self._swap_requests()
            now = time.monotonic()
            covered: dict[int, int] = {}
            waiting: list[TransferRequest] = []
            for req in self._requests_read:
                if req.acks not in covered:
                    covered[req.acks] = self._covered(req.acks)
                if covered[req.acks] >= req.result.next_offset:
                    req.finish(True)
                elif now >= req.deadline:
                    req.finish(False)
                else:
                    waiting.append(req)
            self._requests_read = waiting
            if waiting:
                # An ack that arrived during this pass changed the version after ``seen`` was
                # read, so the wait returns at once instead of missing it.
                deadline = min(r.deadline for r in waiting) - now
                self._master.wait_ack_change(seen, max(0.0, min(_IDLE_WAIT, deadline)))
                continue
            with self._lock:
                # Nothing to watch: the next submit must wake us.
                self._idle = not self._requests_write
            if self._idle:
                self._arrived.wait(_IDLE_WAIT)
                self._arrived.clear()


__all__ = ["GroupTransferService", "TransferRequest"]
