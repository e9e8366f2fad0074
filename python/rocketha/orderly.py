"""The queue side of an orderly push consumer: RocketMQ's ``ConsumeMessageOrderlyService``
with the queue locks of ``RebalanceImpl`` (``lock``, ``lockAll``, ``unlock``).

* A queue is pulled and consumed only while the master of its broker group holds this
  client's lock on it (``LOCK_BATCH_MQ``). Locks are taken after each rebalance and renewed
  every :data:`LOCK_INTERVAL` seconds; one not confirmed for :data:`LOCK_MAX_LIVE_TIME` seconds
  counts as lost, as in the Java client (the broker keeps a lock 60 s), so two members never
  consume a queue at once.
* One handler call at a time per queue, its messages in queue order.
* A failed call (a result other than ``SUCCESS``, or an exception) puts its messages back at
  the head of their queue and suspends the queue ``suspend_current_queue_time`` seconds
  (``SUSPEND_CURRENT_QUEUE_A_MOMENT``). A message that failed ``max_reconsume_times`` times
  goes to the dead-letter queue, and the queue moves on.
* A queue a rebalance takes away is unlocked (``UNLOCK_BATCH_MQ``) once no handler holds its
  messages, so its next owner takes it at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rocketha._core import MessageExt
from rocketha.client import MessageQueue
from rocketha.exceptions import RocketHAError
from rocketha.process_queue import MASTER_ID, ProcessQueue
from rocketha.push_engine import PushEngine

log = logging.getLogger("rocketha.consumer")

#: ``rocketmq.client.rebalance.lockInterval``: seconds between renewals of every lock.
LOCK_INTERVAL = 20.0
#: ``rocketmq.client.rebalance.lockMaxLiveTime``: a lock not confirmed this long is lost.
LOCK_MAX_LIVE_TIME = 30.0
#: ``maxReconsumeTimes`` of an orderly consumer when unset: ``Integer.MAX_VALUE``.
UNBOUNDED_RECONSUME_TIMES = 2**31 - 1


class OrderlyEngine(PushEngine):
    """A :class:`PushEngine` that locks its queues and hands out one batch per queue at a
    time, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: Queues taken away whose lock is given back once their handler finished.
        self._to_unlock: list[ProcessQueue] = []
        super().__init__(*args, **kwargs)

    # -- locks -----------------------------------------------------------------------------

    def _service_tasks(self) -> list[tuple[float, Callable[[], None]]]:
        return [*super()._service_tasks(), (LOCK_INTERVAL, self.lock_all)]

    def _pullable(self, pq: ProcessQueue, now: float) -> bool:
        return _lock_live(pq, now)

    def _rebalanced(self, removed: list[ProcessQueue], added: list[MessageQueue]) -> None:
        with self._lock:
            self._to_unlock.extend(removed)
        self._unlock_finished()
        if added:
            self.lock_all()

    def lock_all(self) -> None:
        """``lockAll``: asks the master of each broker group for this client's queues there;
        a queue confirmed is consumable, one refused (another member holds it) is not."""
        for addr, pqs in self._by_master(self._queues_now()):
            queues = [_wire(pq.mq) for pq in pqs]
            try:
                locked = set(
                    self._api.lock_batch_mq(
                        addr, self.group, self.client_id, queues, self.request_timeout
                    )
                )
            except RocketHAError as e:
                log.info("group %s: locking queues on %s failed: %s", self.group, addr, e)
                continue
            now = time.monotonic()
            with self._cond:
                for pq in pqs:
                    if _wire(pq.mq) in locked:
                        pq.locked_at = now
                    elif pq.locked_at is not None:
                        log.warning("group %s: lost the lock of %s", self.group, pq.mq)
                        pq.locked_at = None
                self._cond.notify_all()
        self._api.wake_pulled()

    def _queues_now(self) -> list[ProcessQueue]:
        with self._lock:
            return list(self._queues.values())

    def _by_master(self, pqs: Iterable[ProcessQueue]) -> list[tuple[str, list[ProcessQueue]]]:
        """``pqs`` by the address of their broker group's master (queues of a group without
        one are left out: only a master keeps locks)."""
        out: dict[str, list[ProcessQueue]] = {}
        with self._lock:
            for pq in pqs:
                route = self._routes.get(pq.mq.topic)
                addr = route and route.broker_addrs.get(pq.mq.broker_name, {}).get(MASTER_ID)
                if addr:
                    out.setdefault(addr, []).append(pq)
        return list(out.items())

    def _leaving(self) -> None:
        """``unlockAllMQ`` at shutdown: the group's other members take the queues at once."""
        with self._lock:
            self._to_unlock = list(self._queues.values())
            for pq in self._to_unlock:
                pq.processing.clear()  # the handlers finished or were given up on
        self._unlock_finished()

    def _unlock_finished(self) -> None:
        """``unlock`` of the queues taken away whose handlers are done."""
        with self._lock:
            done = [pq for pq in self._to_unlock if not pq.processing]
            self._to_unlock = [pq for pq in self._to_unlock if pq.processing]
        for addr, pqs in self._by_master(done):
            try:
                self._api.unlock_batch_mq(
                    addr,
                    self.group,
                    self.client_id,
                    [_wire(pq.mq) for pq in pqs],
                    self.request_timeout,
                )
            except RocketHAError as e:
                log.info("group %s: unlocking queues on %s failed: %s", self.group, addr, e)

    # -- consumption -----------------------------------------------------------------------

    def next_batch(
        self, limit: int, timeout: float
    ) -> tuple[ProcessQueue, list[MessageExt]] | None:
        """Up to ``limit`` messages of one locked queue that no handler holds and no failure
        suspended, in queue order; waits up to ``timeout`` for one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                queues = list(self._queues.values())
                for i in range(len(queues)):
                    pq = queues[(self._next_queue + i) % len(queues)]
                    if pq.cache and not pq.processing and _consumable(pq, now):
                        self._next_queue = (self._next_queue + i + 1) % len(queues)
                        return pq, self._take_from(pq, limit)
                if now >= deadline:
                    return None
                self._cond.wait(min(deadline, _next_resume(queues, now)) - now)

    def complete(self, pq: ProcessQueue, msgs: Sequence[MessageExt]) -> None:
        super().complete(pq, msgs)
        with self._cond:
            for msg in msgs:
                pq.attempts.pop(msg.queue_offset, None)
            self._cond.notify_all()  # the queue's next messages may go to a handler now
        self._unlock_finished()

    def consume_again(
        self, pq: ProcessQueue, msgs: Sequence[MessageExt], suspend: float, bound: int
    ) -> None:
        """A failed call: each message's attempt is counted; those that reached ``bound`` go
        to the dead-letter queue and count as consumed, the rest go back to the head of the
        queue, which is suspended ``suspend`` seconds (``makeMessageToConsumeAgain``)."""
        again: list[MessageExt] = []
        dead: list[MessageExt] = []
        with self._lock:
            for msg in msgs:
                n = pq.attempts.get(msg.queue_offset, 0) + 1
                pq.attempts[msg.queue_offset] = n
                (dead if n >= bound else again).append(msg)
        for msg in dead:
            try:
                self.send_back_to(pq, msg, bound, delay_level=-1)
            except RocketHAError as e:
                log.error("group %s: %s; consumed again", self.group, e)
                again.append(msg)
                continue
            log.warning(
                "group %s: message %s of %s failed %d times: sent to the dead-letter queue",
                self.group,
                msg.msg_id,
                pq.mq,
                bound,
            )
        again.sort(key=lambda m: m.queue_offset)
        kept = {m.queue_offset for m in again}
        if again:
            with self._lock:
                for msg in again:
                    pq.processing.pop(msg.queue_offset, None)
                pq.cache.extendleft((m, MASTER_ID) for m in reversed(again))
                pq.consumed = again[0].queue_offset
                pq.suspended_until = time.monotonic() + suspend
        self.complete(pq, [m for m in msgs if m.queue_offset not in kept])


def _wire(mq: MessageQueue) -> tuple[str, str, int]:
    return (mq.topic, mq.broker_name, mq.queue_id)


def _lock_live(pq: ProcessQueue, now: float) -> bool:
    return pq.locked_at is not None and now - pq.locked_at < LOCK_MAX_LIVE_TIME


def _consumable(pq: ProcessQueue, now: float) -> bool:
    return not pq.dropped and _lock_live(pq, now) and pq.suspended_until <= now


def _next_resume(queues: Iterable[ProcessQueue], now: float) -> float:
    """The soonest time a suspended queue with messages may be consumed again (far off when
    none: a wake-up comes with new messages, a lock or a finished handler)."""
    return min(
        (pq.suspended_until for pq in queues if pq.cache and pq.suspended_until > now),
        default=now + 3600.0,
    )


__all__ = ["LOCK_INTERVAL", "LOCK_MAX_LIVE_TIME", "UNBOUNDED_RECONSUME_TIMES", "OrderlyEngine"]
