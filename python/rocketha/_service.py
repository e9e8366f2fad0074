"""The one helper every background thread of the package runs on: RocketMQ's ``ServiceThread``,
the Python counterpart of the core's (``rust/core/src/sync.rs``).

A service is a named thread that runs a body until it is stopped. The body is handed its
service and sleeps in :meth:`ServiceThread.wait_for_running` between rounds of work::

    def flush(service: ServiceThread) -> None:
        while service.wait_for_running(5.0) is not Woke.STOPPED:
            store.flush()

    flusher = ServiceThread("rocketha-flush", flush)
    flusher.start()
    flusher.wakeup()    # flush now, not in up to 5 s
    flusher.shutdown()  # stop, then wait for the body to return

* **Wake-ups** are RocketMQ's ``hasNotified``: a :meth:`~ServiceThread.wakeup` that comes while
  the body works, or before it first waits, is kept, and its next wait returns at once
  (:attr:`Woke.NOTIFIED`); two wake-ups before one wait are one.
* **Stop**: :meth:`~ServiceThread.stop` ends the current wait and every later one
  (:attr:`Woke.STOPPED`) and sets :attr:`~ServiceThread.stopped`, for a body that checks it
  between rounds. A body that sleeps elsewhere (in a native queue, the GIL released) names
  that queue's wake as ``wake``: a stop or a wake-up calls it, so the body sees them at once
  instead of at its wait's timeout. :meth:`~ServiceThread.join` waits for the body (at most
  ``timeout`` seconds when given); :meth:`~ServiceThread.shutdown` is both, as RocketMQ's.
  Each may be called again, before :meth:`~ServiceThread.start` (a service stopped before it
  starts returns from its first wait), and from the service's own thread, which is then not
  joined.
* **Errors**: an exception that escapes the body ends the service. It is logged at once under
  the service's name, with its traceback (logger ``rocketha.service``): a daemon thread's
  failure must not wait for a join that may never come to be seen. It is kept as
  :attr:`~ServiceThread.error` for the owner to report.
* **Daemon** threads unless told otherwise: a service never keeps the interpreter alive. Its
  owner stops it, at the latest at exit (``rocketha._events.stop_at_exit`` says why that
  matters for a thread that waits in native code).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("rocketha.service")


class Woke(enum.Enum):
    """Why :meth:`ServiceThread.wait_for_running` returned."""

    #: :meth:`ServiceThread.stop`: the body does its last work and returns.
    STOPPED = "stopped"
    #: :meth:`ServiceThread.wakeup`, now or before the wait began.
    NOTIFIED = "notified"
    #: The timeout passed.
    TIMEOUT = "timeout"


class ServiceThread:
    """RocketMQ's ``ServiceThread``: the thread ``name`` running ``body(self)`` from
    :meth:`start` until the body returns (see the module's doc). ``wake`` ends a wait the body
    does outside :meth:`wait_for_running`; ``daemon`` is the thread's."""

    def __init__(
        self,
        name: str,
        body: Callable[[ServiceThread], object],
        *,
        wake: Callable[[], object] | None = None,
        daemon: bool = True,
    ) -> None:
        self._body = body
        self._wake = wake
        # Guards the two flags; waits and wake-ups meet on it.
        self._cond = threading.Condition(threading.Lock())
        #: RocketMQ's ``hasNotified``: a wake-up not yet taken by a wait.
        self._notified = False
        self._stopped = False
        self._started = False
        #: What escaped the body, once it did (the service ended there).
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=daemon)

    @property
    def name(self) -> str:
        return self._thread.name

    @property
    def daemon(self) -> bool:
        return self._thread.daemon

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called: the body returns at its next check."""
        with self._cond:
            return self._stopped

    def start(self) -> None:
        """Runs the body on the service's thread; once."""
        self._thread.start()
        with self._cond:
            self._started = True

    def _run(self) -> None:
        try:
            self._body(self)
        except Exception as e:
            self.error = e
            log.exception("service %s ended on an error", self.name)

    def wait_for_running(self, timeout: float | None = None) -> Woke:
        """RocketMQ's ``waitForRunning``: returns at once when woken since the last wait (taking
        the wake-up) or stopped, else sleeps until either or ``timeout`` seconds (None: no
        limit)."""
        with self._cond:
            self._cond.wait_for(lambda: self._stopped or self._notified, timeout)
            notified, self._notified = self._notified, False
            if self._stopped:
                return Woke.STOPPED
            return Woke.NOTIFIED if notified else Woke.TIMEOUT

    def wakeup(self) -> None:
        """RocketMQ's ``wakeup``: ends the current wait, or the next one if the body is busy."""
        with self._cond:
            if not self._notified:
                self._notified = True
                self._cond.notify()
        if self._wake is not None:
            self._wake()

    def stop(self) -> None:
        """Ends the current wait and every later one; does not wait for the body (see
        :meth:`join`)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._wake is not None:
            self._wake()

    def join(self, timeout: float | None = None) -> None:
        """Waits for the body to return, at most ``timeout`` seconds (None: as long as it
        takes); at once before :meth:`start` and on the service's own thread."""
        with self._cond:
            started = self._started
        if started and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        """RocketMQ's ``shutdown``: :meth:`stop`, then :meth:`join` with ``timeout``."""
        self.stop()
        self.join(timeout)

    def is_alive(self) -> bool:
        """Whether the body is running (started and not returned)."""
        return self._thread.is_alive()


__all__ = ["ServiceThread", "Woke"]
