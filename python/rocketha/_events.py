"""The thread that carries a native service's events into Python: its Rust threads queue them
(state changes, closed connections with their reasons), and this drains the queue, blocking in
Rust with the GIL released until there is something, and hands each event to a handler. It
runs on a :class:`~rocketha._service.ServiceThread`, as every background thread does."""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import Generic, TypeVar

from rocketha._service import ServiceThread

E = TypeVar("E")


class EventPump(Generic[E]):
    """Runs ``handle(event)`` for every event ``next_events(timeout)`` returns, on a daemon
    thread, until :meth:`stop`, or until ``next_events`` returns None (a queue that says it is
    closed and drained). The native service's shutdown closes its queue, which returns a waiting
    ``next_events`` at once."""

    def __init__(
        self,
        name: str,
        next_events: Callable[[float], list[E] | None],
        handle: Callable[[E], None],
    ) -> None:
        self._next_events = next_events
        self._handle = handle
        self._thread = ServiceThread(name, self._run)
        self._thread.start()

    def _run(self, service: ServiceThread) -> None:
        while not service.stopped and self.drain(3600):
            pass

    def drain(self, timeout: float) -> bool:
        """Handles what comes within ``timeout``; False once the queue said it is closed."""
        events = self._next_events(timeout)
        if events is None:
            return False
        for event in events:
            self._handle(event)
        return True

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Call after the native service shut down; handles what it queued last."""
        self._thread.shutdown(timeout=5)
        self.drain(0)


def stop_at_exit(stop: Callable[[], None]) -> None:
    """Runs ``stop``, a service's shutdown, at interpreter exit unless
    :func:`cancel_stop_at_exit` said it ran. A daemon thread that comes back from a native call
    (GIL released) while the interpreter finalizes is ended with ``pthread_exit``, whose forced
    unwind through the binding's frames aborts the process (glibc's ``FATAL: exception not
    rethrown``); ``atexit`` runs before finalization, so the service's threads end first."""
    atexit.register(stop)


def cancel_stop_at_exit(stop: Callable[[], None]) -> None:
    """The service stopped: nothing left for exit (see :func:`stop_at_exit`)."""
    atexit.unregister(stop)


__all__ = ["EventPump", "cancel_stop_at_exit", "stop_at_exit"]
