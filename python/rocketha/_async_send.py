"""asyncio futures for ``Producer.send_async``, completed from Rust.

A send is queued on the client's one connection to its broker (``MQClientAPI.
send_message_async``) and gets a ticket. The client's Rust event loop matches the broker's
answer to the request and queues the ticket's outcome; this module's one thread collects them
(sleeping in Rust, GIL released, until there is one) and completes each send's own
``asyncio.Future`` on its event loop, as ``group_transfer.GroupTransferService`` completes
``put_async`` futures. No thread blocks per send and nothing polls the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from rocketha._core import MQClientAPI
from rocketha._service import ServiceThread

#: Longest sleep without an outcome, so shutdown is noticed.
_IDLE_WAIT = 1.0

SendTuple = tuple[int, str | None, str, int, int, list[str], str | None]


def _settle(future: asyncio.Future[SendTuple], outcome: Any) -> None:
    if future.cancelled():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class AsyncSendService:
    """Completes the futures of ``send_message_async`` tickets of ``api``."""

    def __init__(self, api: MQClientAPI) -> None:
        self._api = api
        #: ticket -> (loop, future) of sends waiting for their outcome, and outcomes that
        #: arrived before their send registered. Guarded by ``_lock``.
        self._waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[SendTuple]]] = {}
        self._early: dict[int, Any] = {}
        self._lock = threading.Lock()
        # A stop also ends the wait in `next_completed`.
        self._thread = ServiceThread("rocketha-send-async", self._run, wake=api.wake_completed)
        self._thread.start()

    def register(self, ticket: int) -> asyncio.Future[SendTuple]:
        """The future of ``ticket``, on the running event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SendTuple] = loop.create_future()
        with self._lock:
            if ticket not in self._early:
                self._waiting[ticket] = (loop, future)
                return future
            outcome = self._early.pop(ticket)
        _settle(future, outcome)
        return future

    def _complete(self, outcomes: list[tuple[int, Any]]) -> None:
        for ticket, outcome in outcomes:
            with self._lock:
                entry = self._waiting.pop(ticket, None)
                if entry is None:
                    self._early[ticket] = outcome
                    continue
            loop, future = entry
            # A closed event loop raises: nobody is left to await its future.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, outcome)

    def _run(self, service: ServiceThread) -> None:
        while not service.stopped:
            self._complete(self._api.next_completed(_IDLE_WAIT))

    def shutdown(self) -> None:
        """Stops the thread after the client closed its connections (which fails every send
        in flight), then completes what was settled meanwhile."""
        self._thread.shutdown(timeout=5)
        # The failures of what was in flight arrive from the client's loop thread.
        while self._waiting and (outcomes := self._api.next_completed(_IDLE_WAIT)):
            self._complete(outcomes)


__all__ = ["AsyncSendService"]
