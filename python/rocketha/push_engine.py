"""The queue side of a push consumer: a :class:`~rocketha.consumer.PullConsumer` whose pulled
messages go to handlers (RocketMQ's ``DefaultMQPushConsumerImpl`` with the pull service and
``ProcessQueue`` bookkeeping of ``ConsumeMessageConcurrentlyService``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rocketha._core import MessageExt
from rocketha.consumer import PullConsumer
from rocketha.exceptions import RocketHAError
from rocketha.process_queue import ProcessQueue
from rocketha.selector import subscription_of
from rocketha.send_back import retry_topic, send_back_target


class PushEngine(PullConsumer):
    """A :class:`PullConsumer` whose messages go to handlers: it subscribes to the retry topic,
    counts the messages being consumed against the pull thresholds, and hands out batches of
    one queue."""

    _consume_type = "CONSUME_PASSIVELY"

    def __init__(self, *args: Any, pull_threshold_for_topic: int, **kwargs: Any) -> None:
        self.pull_threshold_for_topic = pull_threshold_for_topic
        super().__init__(*args, **kwargs)

    def _start(self) -> None:
        retry = retry_topic(self.group)
        self._subscriptions[retry] = subscription_of(retry, "*")
        super()._start()

    def _threshold(self, pq: ProcessQueue) -> int:
        """``pullThresholdForTopic`` split among the topic's queues, when set."""
        if self.pull_threshold_for_topic < 0:
            return self.pull_threshold_for_queue
        queues = sum(1 for mq in self._queues if mq.topic == pq.mq.topic)
        share = max(1, self.pull_threshold_for_topic // max(1, queues))
        return min(self.pull_threshold_for_queue, share)

    def _check_members(self) -> None:
        """While a topic has no route (the retry topic until a broker created it for the
        group's first heartbeat), routes are looked up every second, not every rebalance."""
        if self._unrouted:
            self._refresh_and_rebalance()
        else:
            super()._check_members()

    def next_batch(
        self, limit: int, timeout: float
    ) -> tuple[ProcessQueue, list[MessageExt]] | None:
        """Up to ``limit`` pulled messages of one queue, queue after queue, counted as being
        consumed; waits up to ``timeout`` for some. None when none came."""
        with self._cond:
            if not self._has_cached():
                self._cond.wait(timeout)
            queues = list(self._queues.values())
            for i in range(len(queues)):
                pq = queues[(self._next_queue + i) % len(queues)]
                if not pq.cache:
                    continue
                self._next_queue = (self._next_queue + i + 1) % len(queues)
                return pq, self._take_from(pq, limit)
        return None

    def _take_from(self, pq: ProcessQueue, limit: int) -> list[MessageExt]:
        """Up to ``limit`` of ``pq``'s pulled messages, counted as being consumed."""
        out: list[MessageExt] = []
        while pq.cache and len(out) < limit:
            msg, broker_id = pq.cache.popleft()
            out.append(msg)
            pq.processing[msg.queue_offset] = msg
            pq.consumed = msg.queue_offset + 1
            self._consumed_from[broker_id] = self._consumed_from.get(broker_id, 0) + 1
        return out

    def _has_cached(self) -> bool:
        return any(pq.cache for pq in self._queues.values())

    def complete(self, pq: ProcessQueue, msgs: Sequence[MessageExt]) -> None:
        """``removeMessage``: ``msgs`` are consumed; the queue's commit offset moves past them
        unless a lower one is still being consumed, and its pulls resume if they paused."""
        with self._lock:
            for msg in msgs:
                pq.processing.pop(msg.queue_offset, None)
        self._api.wake_pulled()

    def send_back_to(
        self, pq: ProcessQueue, msg: MessageExt, bound: int, delay_level: int = 0
    ) -> None:
        """``sendMessageBack`` to the master of ``pq``'s broker group (``delay_level`` -1:
        straight to the dead-letter queue)."""
        with self._lock:
            addr, broker_name = send_back_target(self._routes.values(), msg, pq.mq.broker_name)
        self._send_back.send_back(msg, addr, broker_name, delay_level, bound)

    def error(self) -> RocketHAError | None:
        """The broker's refusal that stopped pulls (an unknown group, say), if any."""
        with self._lock:
            return self._error


__all__ = ["PushEngine"]
