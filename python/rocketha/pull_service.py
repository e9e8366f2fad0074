"""The pull side of a consumer: RocketMQ's ``PullMessageService`` (the one thread that keeps a
long poll in flight for every assigned queue) and ``PullAPIWrapper`` (which broker of a group
serves each pull, and what its answer means for the queue).

:class:`PullService` is the base of :class:`~rocketha.consumer.PullConsumer`; what it does is
described there (**Pulls**, **Which broker**). It holds the state the consumer's threads share:
the routes, the assigned queues with their caches, the pulls in flight and the brokers that
refused a connection, all under one lock whose condition wakes the pollers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

from rocketha._core import MQClientAPI
from rocketha._service import ServiceThread
from rocketha.client import MessageQueue
from rocketha.exceptions import (
    MQBrokerError,
    RemotingConnectError,
    RocketHAError,
    SendStatusUnknownError,
)
from rocketha.process_queue import MASTER_ID, ProcessQueue, PullInFlight
from rocketha.rebalance import SubscribeInfo
from rocketha.selector import Subscription

log = logging.getLogger("rocketha.consumer")

#: ``PullSysFlag``: the broker may hold the pull; the request carries the subscription.
_FLAG_SUSPEND, _FLAG_SUBSCRIPTION = 0x2, 0x4
#: Pull answer codes (``ResponseCode``).
_FOUND, _NOT_FOUND, _RETRY_IMMEDIATELY, _OFFSET_MOVED = 0, 19, 20, 21
#: Answers that no retry changes: the group, topic or expression is wrong.
_FATAL = {
    16: "no permission",
    17: "topic does not exist",
    23: "subscription expression malformed",
    26: "subscription group does not exist",
}
#: Seconds before a queue's pull is retried after a failure (``pullTimeDelayMillsWhenException``).
_PULL_DELAY_ON_EXCEPTION = 1.0
#: Extra seconds a held pull's answer may take beyond the suspend time.
_PULL_TIMEOUT_MARGIN = 10.0


class PullService:
    """The pull thread of a consumer and the queue state it shares with the others."""

    # Set by the consumer's constructor.
    group: str
    pull_batch_size: int
    pull_threshold_for_queue: int
    long_polling_timeout: float
    master_retry_interval: float
    _api: MQClientAPI
    _subscriptions: dict[str, Subscription]
    _sub_version: int

    def _init_state(self) -> None:
        """Routes, queues, pulls in flight and brokers down: empty until the first rebalance."""
        # Guards everything below and the state of the classes above; `_cond` wakes pollers
        # when messages arrive.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._routes: dict[str, SubscribeInfo] = {}
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._tickets: dict[int, PullInFlight] = {}
        #: Address -> monotonic time before which it is not tried (it refused a connection).
        self._down_until: dict[str, float] = {}
        #: Broker groups whose master is down while their slave serves no reads: their queues
        #: wait for the master (said once per outage).
        self._waiting_for_master: set[str] = set()
        self._error: RocketHAError | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # -- pollers -------------------------------------------------------------------------

    def _wake_async(self) -> None:
        """Wakes the ``async for`` loops waiting for messages (or for the error that stopped
        pulls); pollers in threads wait on ``_cond``."""
        waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits
                loop.call_soon_threadsafe(_resolve, future)

    # -- broker choice ---------------------------------------------------------------------

    def _usable(self, addr: str, now: float) -> bool:
        return now >= self._down_until.get(addr, 0.0)

    def _pull_target(self, pq: ProcessQueue, now: float) -> tuple[int, str] | None:
        """``findBrokerAddressInSubscribe``: the suggested broker, else the master, else any
        other broker of the group; a broker that refused a connection is skipped until its
        retry time, unless it is the only one."""
        addrs = self._routes[pq.mq.topic].broker_addrs.get(pq.mq.broker_name, {})
        order = [pq.broker_id, MASTER_ID, *sorted(addrs)]
        candidates = [(bid, addrs[bid]) for bid in dict.fromkeys(order) if bid in addrs]
        for bid, addr in candidates:
            if self._usable(addr, now):
                return bid, addr
        return candidates[0] if candidates else None

    def _offset_target(self, broker_name: str, topic: str) -> str | None:
        """Where offsets of ``broker_name``'s queues are read and committed: the master,
        a slave while the master is down or gone from the route."""
        addrs = self._routes[topic].broker_addrs.get(broker_name, {})
        now = time.monotonic()
        ids = sorted(addrs)
        usable = [addrs[i] for i in ids if self._usable(addrs[i], now)]
        return usable[0] if usable else (addrs[ids[0]] if ids else None)

    def _refused(self, addr: str, e: Exception) -> None:
        with self._lock:
            now = time.monotonic()
            was_down = addr in self._down_until
            self._down_until[addr] = now + self.master_retry_interval
        # Said once per outage; each retry that fails again is a debug line.
        log.log(
            logging.DEBUG if was_down else logging.WARNING,
            "broker %s unreachable (%s); using another broker of its group, retrying it every "
            "%.1f s",
            addr,
            e,
            self.master_retry_interval,
        )

    # -- the pull thread -------------------------------------------------------------------

    def _pull_loop(self, service: ServiceThread) -> None:
        while not service.stopped:
            wait = self._dispatch()
            for ticket, outcome in self._api.next_pulled(wait):
                self._on_pulled(ticket, outcome)

    def _dispatch(self) -> float:
        """Sends a pull for every queue with none in flight and room in its cache; returns
        how long to wait for answers before looking again."""
        now = time.monotonic()
        wait = 1.0
        with self._lock:
            ready = []
            for pq in self._queues.values():
                if pq.in_flight or len(pq.cache) + len(pq.processing) >= self._threshold(pq):
                    continue
                if not self._pullable(pq, now):
                    continue  # woken when it may be
                if pq.not_before > now:
                    wait = min(wait, pq.not_before - now)
                    continue
                target = self._pull_target(pq, now)
                if target is not None:
                    pq.in_flight = True
                    ready.append((pq, pq.generation, pq.next_offset, *target))
        for pq, generation, offset, broker_id, addr in ready:
            try:
                ticket = self._api.pull_message_async(
                    addr,
                    consumer_group=self.group,
                    topic=pq.mq.topic,
                    queue_id=pq.mq.queue_id,
                    queue_offset=offset,
                    max_msg_nums=self.pull_batch_size,
                    sys_flag=_FLAG_SUSPEND | _FLAG_SUBSCRIPTION,
                    commit_offset=0,
                    suspend_timeout_millis=int(self.long_polling_timeout * 1000),
                    subscription=self._subscriptions[pq.mq.topic].expression,
                    expression_type=self._subscriptions[pq.mq.topic].expression_type,
                    sub_version=self._sub_version,
                    timeout=self.long_polling_timeout + _PULL_TIMEOUT_MARGIN,
                )
            except RemotingConnectError as e:
                self._refused(addr, e)
                with self._lock:
                    pq.in_flight = False
                wait = 0.0
                continue
            with self._lock:
                self._tickets[ticket] = PullInFlight(pq, generation, broker_id, addr)
        return wait

    def _threshold(self, pq: ProcessQueue) -> int:
        """The most messages ``pq`` holds (pulled and not consumed) before its pulls pause."""
        return self.pull_threshold_for_queue

    def _pullable(self, pq: ProcessQueue, now: float) -> bool:
        """Whether ``pq`` may be pulled now (an orderly consumer's must be locked)."""
        return True

    def _on_pulled(self, ticket: int, outcome: object) -> None:
        with self._lock:
            pull = self._tickets.pop(ticket, None)
            if pull is None:
                return
            pq = pull.pq
            if pull.generation != pq.generation or pq.dropped:
                return
            pq.in_flight = False
            if isinstance(outcome, BaseException):
                self._pull_failed(pull, outcome)
                return
            assert isinstance(outcome, tuple)
            if self._down_until.pop(pull.addr, None) is not None:
                log.warning("broker %s answers again", pull.addr)
            code, remark, suggest, next_begin, _min, _max, msgs = outcome
            if code not in (_FOUND, _NOT_FOUND, _RETRY_IMMEDIATELY, _OFFSET_MOVED):
                self._pull_refused(pull, code, remark or "")
                return
            # PullAPIWrapper.updatePullFromWhichNode: the next pull goes where this one says.
            pq.broker_id = suggest
            if code == _RETRY_IMMEDIATELY and suggest == MASTER_ID != pull.broker_id:
                self._slave_refuses_reads(pq, pull.addr)
            elif pull.broker_id == MASTER_ID and pq.mq.broker_name in self._waiting_for_master:
                self._waiting_for_master.discard(pq.mq.broker_name)
                log.warning("group %s: %s's master answers again", self.group, pq.mq.broker_name)
            if code == _OFFSET_MOVED:
                # The queue was cut below us, or an operator reset the group's offset (which
                # the broker holds now): as the Java client drops its process queue, the group
                # continues from the broker's offset, whatever it cached or is handling.
                log.warning(
                    "%s: %s; moving from %d to %d", pq.mq, remark, pq.next_offset, next_begin
                )
                pq.cache.clear()
                pq.processing.clear()
                pq.consumed = pq.committed = next_begin
            if code != _RETRY_IMMEDIATELY:
                pq.next_offset = next_begin
            tags = self._subscriptions[pq.mq.topic].tags
            kept = [(m, pull.broker_id) for m in msgs if not tags or m.tags in tags]
            if kept:
                pq.cache.extend(kept)
                self._cond.notify_all()
                self._wake_async()
            elif code == _FOUND and not pq.cache:
                # Every message was filtered out: nothing to deliver up to next_begin.
                pq.consumed = next_begin

    def _slave_refuses_reads(self, pq: ProcessQueue, slave: str) -> None:
        """A slave with ``slaveReadEnable=false`` (RocketMQ's default) serves no messages and
        sends the consumer back to the master: while the master is down the queue waits for it,
        as RocketMQ's consumers do, trying again when the master is due, not in a busy loop.
        Called with the lock held."""
        group = pq.mq.broker_name
        master = self._routes[pq.mq.topic].broker_addrs.get(group, {}).get(MASTER_ID)
        now = time.monotonic()
        if master is not None and self._usable(master, now):
            return  # the next pull goes to the master, which is up
        due = self._down_until.get(master, now) if master else now + self.master_retry_interval
        pq.not_before = max(due, now + min(1.0, self.master_retry_interval))
        if group in self._waiting_for_master:
            return
        self._waiting_for_master.add(group)
        where = f"is down ({master})" if master else "is not in the route"
        log.warning(
            "group %s: consuming %s's queues waits for its master: the master %s and the slave "
            "%s serves no messages (slaveReadEnable=false on it, RocketMQ's default). Set "
            "slaveReadEnable=true on the master and the slave to consume from the slave while "
            "the master is down",
            self.group,
            group,
            where,
            slave,
        )

    def _pull_failed(self, pull: PullInFlight, e: BaseException) -> None:
        if isinstance(e, RemotingConnectError | SendStatusUnknownError):
            # A connection refused or lost: the next pull goes to another broker at once.
            self._refused(pull.addr, e)
        else:
            log.warning("pull of %s from %s failed: %s", pull.pq.mq, pull.addr, e)
            pull.pq.not_before = time.monotonic() + _PULL_DELAY_ON_EXCEPTION

    def _pull_refused(self, pull: PullInFlight, code: int, remark: str) -> None:
        pull.pq.not_before = time.monotonic() + _PULL_DELAY_ON_EXCEPTION
        # A slave may not have synced its master's topics and groups yet: only the master's
        # refusal is final.
        if code in _FATAL and pull.broker_id == MASTER_ID:
            self._error = MQBrokerError(code, f"{_FATAL[code]}: {remark}", pull.addr)
            self._cond.notify_all()
            self._wake_async()
        elif pull.broker_id == MASTER_ID:
            log.warning("pull of %s from %s: code %d %s", pull.pq.mq, pull.addr, code, remark)
        else:
            # A slave that has not synced the topic or group yet. Unlike RocketMQ's client,
            # which keeps asking the broker it was sent to, the next pull goes to the master.
            log.info("pull of %s from slave %s: code %d %s", pull.pq.mq, pull.addr, code, remark)
            pull.pq.broker_id = MASTER_ID


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


__all__ = ["PullService"]
