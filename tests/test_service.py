"""The background-thread helper every Python service runs on (``rocketha._service``): wake-ups
kept for the next wait, stop, join, names, and errors logged under the service's name.

No test bounds a wait by the clock: a wait that should return at once waits an hour instead,
so a lost wake-up hangs the test until pytest's timeout reports it with every thread's stack.
"""

from __future__ import annotations

import logging
import queue
import threading

import pytest
from rocketha._events import EventPump
from rocketha._service import ServiceThread, Woke

#: A wait that only a wake-up or a stop ends.
LONG = 3600.0


def test_a_wakeup_before_the_wait_is_not_lost() -> None:
    go = threading.Event()
    woke: queue.SimpleQueue[Woke] = queue.SimpleQueue()

    def body(service: ServiceThread) -> None:
        go.wait()
        woke.put(service.wait_for_running(LONG))
        woke.put(service.wait_for_running(None))

    service = ServiceThread("test-service", body)
    service.wakeup()  # before the start: kept too
    service.start()
    service.wakeup()
    go.set()
    assert woke.get() is Woke.NOTIFIED
    service.shutdown()
    assert woke.get() is Woke.STOPPED, "wake-ups before one wait are one wake-up"


def test_a_wait_with_nothing_to_wake_it_times_out() -> None:
    service = ServiceThread("test-service", lambda _: None)
    assert service.wait_for_running(0) is Woke.TIMEOUT
    service.wakeup()
    assert service.wait_for_running(0) is Woke.NOTIFIED
    assert service.wait_for_running(0) is Woke.TIMEOUT, "a wake-up is taken by one wait"


def test_stop_wakes_a_waiting_thread_and_join_waits_for_the_body() -> None:
    waiting = threading.Event()
    ended = threading.Event()
    woke: list[Woke] = []

    def body(service: ServiceThread) -> None:
        waiting.set()
        woke.append(service.wait_for_running(LONG))
        woke.append(service.wait_for_running(LONG))
        ended.set()

    service = ServiceThread("test-service", body)
    service.start()
    waiting.wait()
    assert not service.stopped
    service.stop()
    assert service.stopped
    service.join()
    assert ended.is_set() and not service.is_alive()
    assert woke == [Woke.STOPPED, Woke.STOPPED], "every wait after a stop returns at once"
    service.shutdown()  # again: nothing left to stop or join


def test_a_service_stopped_before_it_starts_ends_at_its_first_wait() -> None:
    woke: list[Woke] = []
    service = ServiceThread("test-service", lambda s: woke.append(s.wait_for_running(LONG)))
    service.join()  # not started: nothing to wait for
    service.shutdown()
    service.start()
    service.join()
    assert woke == [Woke.STOPPED]


def test_wake_ends_a_wait_outside_the_service() -> None:
    """A body that sleeps in a native queue names its wake: a wake-up and a stop call it."""
    native: queue.SimpleQueue[str] = queue.SimpleQueue()
    seen: queue.SimpleQueue[str] = queue.SimpleQueue()

    def body(service: ServiceThread) -> None:
        while not service.stopped:
            seen.put(native.get())

    service = ServiceThread("test-service", body, wake=lambda: native.put("woken"))
    service.start()
    service.wakeup()
    assert seen.get() == "woken"
    service.shutdown()
    assert not service.is_alive()


def test_the_body_may_stop_and_join_its_own_service() -> None:
    returned = threading.Event()

    def body(service: ServiceThread) -> None:
        service.shutdown()  # not a join of itself, which would never return
        returned.set()

    service = ServiceThread("test-service", body)
    service.start()
    service.join()
    assert returned.is_set() and service.stopped and service.error is None


@pytest.mark.parametrize("daemon", [True, False])
def test_the_thread_has_the_name_and_daemon_flag_given(daemon: bool) -> None:
    seen: list[tuple[str, bool]] = []

    def body(_: ServiceThread) -> None:
        me = threading.current_thread()
        seen.append((me.name, me.daemon))

    service = ServiceThread("rocketha-test-named", body, daemon=daemon)
    assert (service.name, service.daemon) == ("rocketha-test-named", daemon)
    service.start()
    service.join()
    assert seen == [("rocketha-test-named", daemon)]


def test_daemon_unless_told_otherwise() -> None:
    assert ServiceThread("test-service", lambda _: None).daemon


def test_an_error_in_the_body_is_logged_with_the_name_and_kept(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    unhandled: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", unhandled.append)
    error = ValueError("the body broke")

    def body(_: ServiceThread) -> None:
        raise error

    service = ServiceThread("rocketha-test-failing", body)
    with caplog.at_level(logging.ERROR, logger="rocketha.service"):
        service.start()
        service.join()
    assert service.error is error and not service.is_alive()
    [record] = [r for r in caplog.records if r.name == "rocketha.service"]
    assert record.levelno == logging.ERROR
    assert "rocketha-test-failing" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[1] is error, "with its traceback"
    assert not unhandled, "reported once, by the service, not again as an unhandled error"
    service.shutdown()  # a failed service stops and joins as any other


def test_event_pump_hands_each_event_over_until_its_queue_closes() -> None:
    """The pump of ``_events`` runs on the helper: it ends once its queue says it is closed."""
    events: queue.SimpleQueue[int] = queue.SimpleQueue()
    handled: queue.SimpleQueue[int] = queue.SimpleQueue()
    closed = threading.Event()

    def next_events(timeout: float) -> list[int] | None:
        if closed.is_set():
            return None  # the native queue says it is closed and drained
        try:
            first = events.get(timeout=timeout)
        except queue.Empty:
            return []
        return [first]

    pump = EventPump("rocketha-test-events", next_events, handled.put)
    events.put(1)
    assert handled.get() == 1
    closed.set()
    events.put(2)  # ends the pump's wait: the next call sees the queue closed
    pump.stop()
    assert not pump.is_alive()
