"""The Python face of RocketMQ's ``GroupTransferService``: futures for ``Broker.put_async``.

Every put that must wait (SYNC_FLUSH's msync, SYNC_MASTER's slave acks) waits in the store's
GroupTransferService in Rust, which decides its ``PutStatus`` the moment the flush or the ack
that covers it arrives, or its deadline passes. A blocking ``put`` parks there with the GIL
released. A ``put_async`` gets a ticket instead; this module's one thread collects the verdicts
of tickets (sleeping in Rust until there is one) and completes each put's own
``Future[PutResult]``, as RocketMQ's GroupCommitRequest completes its put result. No thread
blocks per message and nothing polls.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

from rocketha._core import Message, PutResult
from rocketha._events import cancel_stop_at_exit, stop_at_exit
from rocketha._service import ServiceThread
from rocketha.roles import PutStatus
from rocketha.store import MessageStore

log = logging.getLogger("rocketha.group_transfer")

#: Longest sleep without a verdict, so shutdown is noticed.
_IDLE_WAIT = 1.0


class GroupTransferService:
    """Completes the futures of ``put_async`` puts on ``store`` with their verdicts."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        #: ticket -> (future, the put as stored). Guarded by ``_lock``, which a put holds from
        #: its append to its registration, so a verdict never arrives for an unknown ticket.
        self._pending: dict[int, tuple[Future[PutResult], PutResult]] = {}
        self._lock = threading.Lock()
        self._thread: ServiceThread | None = None

    def start(self) -> GroupTransferService:
        """Starts the thread; a second call is the same service."""
        if self._thread is not None:
            return self
        # A stop also ends the wait in `next_completed`.
        self._thread = ServiceThread(
            "rocketha-group-transfer", self._run, wake=self._store.wake_completed
        )
        self._thread.start()
        stop_at_exit(self.shutdown)
        return self

    def put(self, msg: Message) -> Future[PutResult]:
        """Stores ``msg`` now; the future resolves with the put's verdict."""
        future: Future[PutResult] = Future()
        with self._lock:
            result, ticket = self._store.put_async(msg)
            if ticket is not None:
                self._pending[ticket] = (future, result)
                return future
        future.set_result(result)
        return future

    def _complete(self, verdicts: list[tuple[int, PutStatus]]) -> None:
        with self._lock:
            done = [(self._pending.pop(ticket), status) for ticket, status in verdicts]
        for (future, result), status in done:
            future.set_result(result if status is PutStatus.PUT_OK else result.with_status(status))

    def _run(self, service: ServiceThread) -> None:
        while not service.stopped:
            self._complete(self._store.next_completed(_IDLE_WAIT))

    def shutdown(self) -> None:
        """Stops the thread, then completes what the store settled meanwhile. Call it after
        the store closed: closing settles every put still waiting (as timed out)."""
        if self._thread is None:
            return
        cancel_stop_at_exit(self.shutdown)
        self._thread.shutdown(timeout=5)
        self._thread = None
        while self._pending and (verdicts := self._store.next_completed(0)):
            self._complete(verdicts)
        # The store settles every request when it closes; a put whose verdict is lost anyway
        # is answered as not acknowledged, never left hanging.
        with self._lock:
            orphans, self._pending = list(self._pending.values()), {}
        for future, result in orphans:
            future.set_result(result.with_status(PutStatus.FLUSH_SLAVE_TIMEOUT))


__all__ = ["GroupTransferService"]
