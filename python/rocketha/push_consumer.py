"""A push consumer, like RocketMQ's ``DefaultMQPushConsumer`` with a concurrent listener, or
an orderly one (``orderly=True``, ``MessageListenerOrderly``: see :mod:`rocketha.orderly`).

>>> def handle(msg: MessageExt) -> ConsumeResult:
...     print(msg.topic, msg.body)
...     return ConsumeResult.SUCCESS
>>> with PushConsumer("127.0.0.1:9876", "orders-consumer", ["orders"], handle):
...     time.sleep(60)

What it does, by RocketMQ's names:

* **Pulls and rebalance** are :class:`~rocketha.consumer.PullConsumer`'s (long polls, failover
  to the slave, the group's queues split among its members), with the group's retry topic
  ``%RETRY%<group>`` subscribed by itself (``copySubscription``, clustering) and the heartbeat
  saying ``CONSUME_PASSIVELY``.
* **Consumption** (``ConsumeMessageConcurrentlyService``): up to ``consume_threads`` handler
  calls at once, on a thread pool, or as coroutines on an event loop the consumer owns when the
  handler is ``async def``. Each call gets one message (or, with ``batch_size``, up to that
  many of one queue). A message of the retry topic shows its original topic
  (``resetRetryAndNamespace``).
* **Results** (``processConsumeResult``): ``ConsumeResult.SUCCESS`` completes the messages;
  ``RECONSUME_LATER``, an exception or anything else sends them back (``CONSUMER_SEND_MSG_BACK``
  to the master of their broker group): the broker delivers them again through the retry topic
  after the next delay level, and after ``max_reconsume_times`` attempts puts them in
  ``%DLQ%<group>``. When the send-back fails they go to the retry topic as new messages; when
  that fails too they stay with the consumer, which hands them to the handler again 5 s later.
* **Flow control**: a queue's pulls pause while it holds ``pull_threshold_for_queue`` messages
  pulled and not completed (``pull_threshold_for_topic``, if set, is shared among a topic's
  queues).
* **Offsets** (``ProcessQueue.removeMessage``): a commit stores the lowest offset still being
  consumed, so nothing is committed past a message whose handler has not finished. Delivery is
  at least once: a crash or a rebalance redelivers what was in flight.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from typing import Any

from rocketha._core import MessageExt
from rocketha._events import cancel_stop_at_exit, stop_at_exit
from rocketha._service import ServiceThread
from rocketha.exceptions import MQClientError, RocketHAError
from rocketha.orderly import UNBOUNDED_RECONSUME_TIMES, OrderlyEngine
from rocketha.process_queue import ProcessQueue
from rocketha.push_engine import PushEngine
from rocketha.send_back import (
    check_max_reconsume_times,
    restore_retry_topic,
    retry_topic,
)

log = logging.getLogger("rocketha.consumer")

#: Seconds before messages whose send-back failed are consumed again
#: (``submitConsumeRequestLater``).
CONSUME_LATER_DELAY = 5.0
#: Longest wait of the dispatcher, so shutdown is noticed.
_IDLE_WAIT = 0.5


class ConsumeResult(StrEnum):
    """RocketMQ's ``ConsumeConcurrentlyStatus`` and ``ConsumeOrderlyStatus``: anything but
    ``SUCCESS`` is a failure, sent back by a concurrent consumer, retried in place by an
    orderly one after its queue's suspension."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


Handler = Callable[[Any], "ConsumeResult | Awaitable[ConsumeResult]"]


class PushConsumer:
    """RocketMQ's ``DefaultMQPushConsumer`` (clustering, concurrent listener). Nothing runs
    until :meth:`start` (or ``with``); :meth:`shutdown` waits for the handlers running.

    ``handler`` takes a :class:`~rocketha.MessageExt` (a list of them with ``batch_size``) and
    returns a :class:`ConsumeResult`; an ``async def`` handler runs on the consumer's own event
    loop, ``consume_threads`` calls at once. With ``orderly=True`` (``MessageListenerOrderly``)
    each queue is locked on its master and consumed one call at a time in queue order; a failed
    call is retried in place after ``suspend_current_queue_time`` seconds, up to
    ``max_reconsume_times`` (unbounded unless given) before the dead-letter queue.
    ``options`` are :class:`~rocketha.PullConsumer`'s (``subscription``,
    ``consume_from_where``, ``pull_batch_size``, ``pull_threshold_for_queue``,
    ``auto_commit_interval``, TLS, ``credentials``, ...).
    """

    def __init__(
        self,
        namesrv_addr: str,
        group: str,
        topics: str | Sequence[str],
        handler: Handler,
        *,
        batch_size: int | None = None,
        consume_threads: int = 20,
        max_reconsume_times: int | None = None,
        pull_threshold_for_topic: int = -1,
        orderly: bool = False,
        suspend_current_queue_time: float = 1.0,
        **options: Any,
    ) -> None:
        if not callable(handler):
            raise MQClientError(f"handler must be callable, got {handler!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise MQClientError(f"batch_size must be >= 1 (or None: one message), got {batch_size}")
        if consume_threads < 1:
            raise MQClientError(f"consume_threads must be >= 1, got {consume_threads}")
        if suspend_current_queue_time < 0:
            raise MQClientError(
                f"suspend_current_queue_time must be >= 0, got {suspend_current_queue_time}"
            )
        unbounded = orderly and max_reconsume_times in (None, -1)
        self.max_reconsume_times = (
            UNBOUNDED_RECONSUME_TIMES
            if unbounded
            else check_max_reconsume_times(max_reconsume_times)
        )
        self.orderly = orderly
        self.suspend_current_queue_time = suspend_current_queue_time
        self.namesrv_addr = namesrv_addr
        self.group = group
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self.handler = handler
        self.batch_size = batch_size
        self.consume_threads = consume_threads
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self._options = options
        # A coroutine function, or an object whose `__call__` is one.
        self._is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            type(handler).__call__
        )
        self._state = threading.Lock()
        self._engine: PushEngine | None = None
        self._stopped = threading.Event()
        self._slots = threading.Semaphore(consume_threads)
        #: (due, sequence, queue, messages) to consume again: their send-back failed.
        self._later: list[tuple[float, int, ProcessQueue, list[MessageExt]]] = []
        self._later_seq = itertools.count()
        self._pool: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dispatcher: ServiceThread | None = None
        self._loop_thread: ServiceThread | None = None
        self._error_logged = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> PushConsumer:
        """Subscribes, rebalances and starts consuming; a second call is the same consumer.
        Raises what the first rebalance raised (no name server, an unknown topic's bad name)."""
        with self._state:
            if self._stopped.is_set():
                raise MQClientError("this PushConsumer was shut down; make a new one")
            if self._engine is not None:
                return self
            engine = (OrderlyEngine if self.orderly else PushEngine)(
                self.namesrv_addr,
                self.group,
                [*self.topics, retry_topic(self.group)],
                pull_threshold_for_topic=self.pull_threshold_for_topic,
                **self._options,
            )
            self._pool = ThreadPoolExecutor(self.consume_threads, "rocketha-consume")
            if self._is_async:
                loop = self._loop = asyncio.new_event_loop()
                # Stopped by `loop.stop` in `shutdown`.
                self._loop_thread = ServiceThread(
                    "rocketha-consume-loop", lambda _: loop.run_forever()
                )
                self._loop_thread.start()
            self._engine = engine
            self._dispatcher = ServiceThread("rocketha-consume-dispatch", self._dispatch_loop)
            self._dispatcher.start()
            stop_at_exit(self.shutdown)
        return self

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self, timeout: float | None = None) -> None:
        """Stops handing out messages, waits up to ``timeout`` seconds (None: as long as they
        take) for the handlers running, commits what they completed, unregisters and closes.
        What was pulled and not consumed is delivered again later. Idempotent."""
        with self._state:
            if self._stopped.is_set():
                return
            self._stopped.set()
            engine = self._engine
        cancel_stop_at_exit(self.shutdown)
        if engine is None:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        assert self._dispatcher is not None and self._pool is not None
        self._dispatcher.shutdown()
        for _ in range(self.consume_threads):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._slots.acquire(timeout=left):
                log.warning("group %s: handlers still running at shutdown", self.group)
                break
        if self._loop is not None and self._loop_thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.shutdown()
            self._loop.close()
        self._pool.shutdown(wait=False)
        engine.close()

    def close(self) -> None:
        """:meth:`shutdown`."""
        self.shutdown()

    # -- consumption -----------------------------------------------------------------------

    def _dispatch_loop(self, service: ServiceThread) -> None:
        engine = self._engine
        assert engine is not None
        limit = self.batch_size or 1
        while not service.stopped:
            if not self._slots.acquire(timeout=_IDLE_WAIT):
                continue
            batch, wait = self._due_later()
            if batch is None:
                batch = engine.next_batch(limit, wait)
            if batch is None:
                self._slots.release()
                self._log_error(engine)
                continue
            self._submit(*batch)

    def _due_later(self) -> tuple[tuple[ProcessQueue, list[MessageExt]] | None, float]:
        """Messages whose send-back failed, once their delay passed (a dropped queue's are
        forgotten: its new owner consumes them); else how long to wait for new ones."""
        now = time.monotonic()
        with self._state:
            while self._later and self._later[0][0] <= now:
                _, _, pq, msgs = heapq.heappop(self._later)
                if not pq.dropped:
                    return (pq, msgs), 0.0
            due = self._later[0][0] if self._later else now + _IDLE_WAIT
        return None, max(0.0, min(_IDLE_WAIT, due - now))

    def _log_error(self, engine: PushEngine) -> None:
        error = engine.error()
        if error is not None and not self._error_logged:
            self._error_logged = True
            log.error("group %s: pulls refused: %s", self.group, error)

    def _submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """One handler call (``ConsumeRequest``) on the pool or the loop; each message shows
        its original topic."""
        shown = [restore_retry_topic(m, self.group) for m in msgs]
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._consume_async(pq, shown), self._loop)
            return
        assert self._pool is not None
        self._pool.submit(self._consume, pq, shown)

    def _argument(self, msgs: list[MessageExt]) -> Any:
        return msgs if self.batch_size is not None else msgs[0]

    def _consume(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        try:
            try:
                result = self.handler(self._argument(msgs))
            except Exception:
                log.exception("group %s: the handler raised; consumed again later", self.group)
                result = ConsumeResult.RECONSUME_LATER
            self._process_result(pq, msgs, result)
        finally:
            self._slots.release()

    async def _consume_async(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        try:
            try:
                result = await self.handler(self._argument(msgs))  # type: ignore[misc]
            except Exception:
                log.exception("group %s: the handler raised; consumed again later", self.group)
                result = ConsumeResult.RECONSUME_LATER
            await asyncio.to_thread(self._process_result, pq, msgs, result)
        finally:
            self._slots.release()

    def _process_result(self, pq: ProcessQueue, msgs: list[MessageExt], result: object) -> None:
        """``processConsumeResult`` (clustering): failed messages are sent back, and the
        queue's offset moves past what is done. A message neither sent back nor sent to the
        retry topic stays in the queue (nothing is committed past it) and is consumed again
        after :data:`CONSUME_LATER_DELAY` seconds."""
        engine = self._engine
        assert engine is not None
        if pq.dropped:
            # The queue went to another member, which consumes from the last commit.
            engine.complete(pq, msgs)
            return
        if isinstance(engine, OrderlyEngine):
            if result == ConsumeResult.SUCCESS:
                engine.complete(pq, msgs)
            else:
                engine.consume_again(
                    pq, msgs, self.suspend_current_queue_time, self.max_reconsume_times
                )
            return
        failed: list[MessageExt] = []
        if result != ConsumeResult.SUCCESS:
            if not isinstance(result, ConsumeResult):
                log.warning(
                    "group %s: the handler returned %r, not a ConsumeResult: consumed again "
                    "later, as RocketMQ treats a null status",
                    self.group,
                    result,
                )
            for msg in msgs:
                try:
                    engine.send_back_to(pq, msg, self.max_reconsume_times)
                except RocketHAError as e:
                    log.error(
                        "group %s: %s; consumed again in %g s", self.group, e, CONSUME_LATER_DELAY
                    )
                    failed.append(msg)
        if failed:
            due = time.monotonic() + CONSUME_LATER_DELAY
            with self._state:
                heapq.heappush(self._later, (due, next(self._later_seq), pq, failed))
        kept = {m.queue_offset for m in failed}
        engine.complete(pq, [m for m in msgs if m.queue_offset not in kept])

    # -- introspection ---------------------------------------------------------------------

    def consumed_from(self) -> dict[int, int]:
        """Messages handed to the handler, by the broker id that served them (0 the master)."""
        engine = self._engine
        return {} if engine is None else engine.consumed_from()


__all__ = ["CONSUME_LATER_DELAY", "ConsumeResult", "PushConsumer"]
