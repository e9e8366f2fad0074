"""A pull consumer over RocketMQ's remoting protocol, like RocketMQ's ``DefaultLitePullConsumer``.

>>> with PullConsumer("127.0.0.1:9876", "orders-consumer", ["orders"]) as consumer:
...     for msg in consumer.poll(timeout=1.0):
...         print(msg.queue_offset, msg.body)

What it does, by RocketMQ's names:

* **Rebalance** (``RebalanceImpl``): the readable queues of every broker group of each topic,
  split among the group's consumers (``GET_CONSUMER_LIST_BY_GROUP``) by
  ``AllocateMessageQueueAveragely``, again within a second of a member joining or leaving and
  every ``rebalance_interval`` seconds. A new queue
  starts at the group's committed offset (``QUERY_CONSUMER_OFFSET``), or where
  ``consume_from_where`` says when the group has none.
* **Pulls** run in the background: one long poll (``PULL_MESSAGE`` with the suspend flag) per
  assigned queue, all held at once on one connection per broker, answered by the Rust client
  on its own thread; the messages wait in the queue's cache (at most
  ``pull_threshold_for_queue``) until :meth:`PullConsumer.poll` takes them.
* **Which broker** (``PullAPIWrapper``, ``findBrokerAddressInSubscribe``): each queue's next
  pull goes to the broker the last answer suggested (``suggestWhichBrokerId``: the slave when
  the consumer lags beyond the master's memory, the master again once it caught up). The
  master is preferred; when it is missing from the route or refuses the connection, the pull
  goes to another broker of the group at once, and the master is tried again after
  ``master_retry_interval`` seconds.
* **Offsets**: what :meth:`PullConsumer.poll` returned is committed (``UPDATE_CONSUMER_OFFSET``)
  every ``auto_commit_interval`` seconds, on :meth:`PullConsumer.commit_sync` and at
  :meth:`PullConsumer.close`, to the master, or to a slave while the master is down.

Delivery is at least once: a message polled but not committed before a crash is delivered
again. Thread-safe: ``poll``, ``seek``, ``commit_sync`` and ``close`` may be called from any
thread, ``async for`` from any event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from rocketha._core import MessageExt
from rocketha._events import cancel_stop_at_exit, stop_at_exit
from rocketha._service import ServiceThread, Woke
from rocketha.acl import SessionCredentials, mq_client_api
from rocketha.client import MessageQueue, check_topic_names, namesrv_addrs
from rocketha.exceptions import (
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RocketHAError,
    SendStatusUnknownError,
)
from rocketha.process_queue import MASTER_ID, ProcessQueue, PullInFlight
from rocketha.rebalance import (
    ConsumeFromWhere,
    SubscribeInfo,
    allocate_message_queue_averagely,
    compute_pull_from_where,
    parse_subscribe_route,
    queue_key,
)
from rocketha.selector import MessageSelector, check_client_in_broker, subscription_of
from rocketha.send_back import SendBack, producer_options, send_back_target
from rocketha.tls import client_tls

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
#: Seconds between checks of the group's members (a change rebalances at once).
_MEMBERS_CHECK_INTERVAL = 1.0
#: Extra seconds a held pull's answer may take beyond the suspend time.
_PULL_TIMEOUT_MARGIN = 10.0


class PullConsumer:
    """RocketMQ's ``DefaultLitePullConsumer`` in clustering mode, synchronous and asyncio.

    ``use_tls`` and the ``tls_*`` options are :class:`~rocketha.Producer`'s.
    """

    def __init__(
        self,
        namesrv_addr: str,
        group: str,
        topics: str | Sequence[str],
        *,
        subscription: str | MessageSelector = "*",
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | None = None,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        long_polling_timeout: float = 20.0,
        rebalance_interval: float = 20.0,
        auto_commit_interval: float = 5.0,
        heartbeat_broker_interval: float = 30.0,
        master_retry_interval: float = 5.0,
        request_timeout: float = 3.0,
        client_ip: str = "127.0.0.1",
        use_tls: bool = False,
        tls_trust_cert_path: str | None = None,
        tls_verify: bool = True,
        tls_cert_path: str | None = None,
        tls_key_path: str | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        inner_producer = producer_options(locals())  # send-back's, connecting as this does
        self.namesrv_addrs = namesrv_addrs(namesrv_addr)
        if not group:
            raise MQClientError("group: a consumer group name is required")
        self.topics = check_topic_names(topics)
        if pull_batch_size < 1 or pull_threshold_for_queue < pull_batch_size:
            raise MQClientError(
                f"pull_batch_size ({pull_batch_size}) must be >= 1 and at most "
                f"pull_threshold_for_queue ({pull_threshold_for_queue})"
            )
        sub = subscription_of(self.topics[0], subscription)
        self.subscription, self._subscriptions = sub.expression, {t: sub for t in self.topics}
        self.group = group
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        #: ``consumeTimestamp``: half an hour ago unless given (ms).
        self.consume_timestamp = (
            consume_timestamp
            if consume_timestamp is not None
            else int(time.time() * 1000) - 1_800_000
        )
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.long_polling_timeout = long_polling_timeout
        self.rebalance_interval = rebalance_interval
        self.auto_commit_interval = auto_commit_interval
        self.heartbeat_broker_interval = heartbeat_broker_interval
        self.master_retry_interval = master_retry_interval
        self.request_timeout = request_timeout
        self.client_id = f"{client_ip}@{os.getpid()}#{time.monotonic_ns()}"
        self._sub_version = int(time.time() * 1000)
        self._api = mq_client_api(
            client_ip,
            credentials,
            client_tls(
                use_tls,
                trust_cert_path=tls_trust_cert_path,
                verify=tls_verify,
                cert_path=tls_cert_path,
                key_path=tls_key_path,
            ),
        )
        self._send_back = SendBack(self._api, group, namesrv_addr, inner_producer)
        self._init_state()
        self._start()

    #: ``ConsumeType`` in heartbeats: a pull consumer consumes actively.
    _consume_type = "CONSUME_ACTIVELY"

    def _init_state(self) -> None:
        """Routes, queues, pulls in flight and brokers down: empty until the first rebalance."""
        # Guards everything below; `_cond` wakes pollers when messages arrive.
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
        self._consumed_from: dict[int, int] = {}
        self._error: RocketHAError | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._next_queue = 0
        #: The group's sorted client ids at the last rebalance.
        self._members: list[str] = []
        self._closed = threading.Event()
        #: Topics the name servers had no route for at the last look: waited for, as the Java
        #: consumer waits, and logged once each.
        self._unrouted: set[str] = set()

    def _start(self) -> None:
        """The first rebalance, in the caller's thread so that its errors are the
        constructor's; then the pull and service threads."""
        try:
            self._refresh_and_rebalance()
            check_client_in_broker(self._api, self.client_id, self.group, self._subscriptions,
                                   self._routes, self.request_timeout)  # fmt: skip
        except BaseException:
            self._api.close()
            raise
        # A stop also ends the pull thread's wait in `next_pulled`.
        self._puller = ServiceThread("rocketha-pull", self._pull_loop, wake=self._api.wake_pulled)
        self._service = ServiceThread("rocketha-consumer-service", self._service_loop)
        self._puller.start()
        self._service.start()
        stop_at_exit(self.close)

    # -- public API ------------------------------------------------------------------------

    def __enter__(self) -> PullConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self, timeout: float = 5.0, max_messages: int | None = None) -> list[MessageExt]:
        """Up to ``max_messages`` (default ``pull_batch_size``) pulled messages, waiting up
        to ``timeout`` seconds for the first; ``[]`` when none came. What it returns counts as
        consumed: the next commit stores the offsets past it. Raises the error that stopped
        pulls (an unknown group, a refused subscription) with the broker's reason."""
        deadline = time.monotonic() + timeout
        limit = self.pull_batch_size if max_messages is None else max(1, max_messages)
        with self._cond:
            while True:
                self._check()
                taken = self._take(limit)
                if taken or self._closed.is_set():
                    return taken
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._cond.wait(left)

    def __iter__(self) -> Iterator[MessageExt]:
        """Every message, blocking, until :meth:`close`. Taken one at a time, so leaving the
        loop early leaves nothing counted as consumed that the loop did not see."""
        while not self._closed.is_set():
            yield from self.poll(1.0, max_messages=1)

    async def __aiter__(self) -> AsyncIterator[MessageExt]:
        """Every message, awaiting arrivals on the running loop (no thread per wait), until
        :meth:`close`. Taken one at a time, as :meth:`__iter__`."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                self._check()
                taken = self._take(1)
                if not taken:
                    if self._closed.is_set():
                        return
                    future: asyncio.Future[None] = loop.create_future()
                    self._waiters.append((loop, future))
            if taken:
                yield taken[0]
                continue
            await future

    def commit_sync(self) -> None:
        """Commits what :meth:`poll` returned, waiting for each broker's answer."""
        self._commit(oneway=False)

    def send_back(
        self, message: MessageExt, delay_level: int = 0, max_reconsume_times: int | None = None
    ) -> None:
        """:meth:`SendBack.send_back <rocketha.send_back.SendBack.send_back>` of ``message``
        to the master of its broker group. List ``%RETRY%<group>`` in ``topics`` to read the
        retries: a pull consumer does not subscribe to it by itself."""
        with self._lock:
            addr, broker_name = send_back_target(self._routes.values(), message)
        self._send_back.send_back(message, addr, broker_name, delay_level, max_reconsume_times)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """The next message of ``mq`` is the one at ``offset``; what was pulled beyond it is
        dropped. ``mq`` must be assigned to this consumer."""
        with self._lock:
            pq = self._queues.get(mq)
            if pq is None:
                raise MQClientError(f"seek: {mq} is not assigned to this consumer")
            pq.generation += 1
            pq.cache.clear()
            pq.in_flight = False
            pq.next_offset = pq.consumed = offset
        self._api.wake_pulled()

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer owns after the last rebalance."""
        with self._lock:
            return sorted(self._queues, key=lambda q: (q.topic, q.broker_name, q.queue_id))

    def committed(self, mq: MessageQueue) -> int | None:
        """The offset this consumer last committed for ``mq`` (None if not assigned)."""
        with self._lock:
            pq = self._queues.get(mq)
            return None if pq is None else pq.committed

    def consumed_from(self) -> dict[int, int]:
        """Messages :meth:`poll` returned, by the broker id that served them (0 the
        master)."""
        with self._lock:
            return dict(self._consumed_from)

    def close(self) -> None:
        """Commits, unregisters from every broker and closes the connections. Idempotent."""
        if self._closed.is_set():
            return
        cancel_stop_at_exit(self.close)
        self._closed.set()
        self._puller.stop()
        self._service.shutdown()
        self._puller.join()
        with contextlib.suppress(RocketHAError):
            self._commit(oneway=False)
        self._leaving()
        for addr in self._all_addrs():
            try:
                self._api.unregister_client(
                    addr, self.client_id, consumer_group=self.group, timeout=self.request_timeout
                )
            except (RemotingConnectError, SendStatusUnknownError) as e:
                log.info("unregistering from %s failed: %s", addr, e)
        self._send_back.close()
        self._api.close()
        with self._cond:
            self._cond.notify_all()
            self._wake_async()

    # -- polling ---------------------------------------------------------------------------

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _take(self, limit: int) -> list[MessageExt]:
        """Up to ``limit`` cached messages, queue after queue; moves consumed offsets."""
        queues = list(self._queues.values())
        out: list[MessageExt] = []
        refill = False
        for i in range(len(queues)):
            pq = queues[(self._next_queue + i) % len(queues)]
            while pq.cache and len(out) < limit:
                msg, broker_id = pq.cache.popleft()
                out.append(msg)
                pq.consumed = msg.queue_offset + 1
                self._consumed_from[broker_id] = self._consumed_from.get(broker_id, 0) + 1
            refill |= len(pq.cache) < self.pull_threshold_for_queue and not pq.in_flight
            if len(out) >= limit:
                self._next_queue = (self._next_queue + i + 1) % len(queues)
                break
        if out and refill:
            self._api.wake_pulled()
        return out

    def _wake_async(self) -> None:
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

    def waiting_for_master(self) -> set[str]:
        """Broker groups whose queues wait for their master: it is down and the slave serves
        no reads (``slaveReadEnable=false``)."""
        with self._lock:
            return set(self._waiting_for_master)

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

    # -- the service thread: heartbeats, rebalance, commits --------------------------------

    def _service_tasks(self) -> list[tuple[float, Callable[[], None]]]:
        """(interval, task) the service thread runs."""
        return [
            (self.heartbeat_broker_interval, self._heartbeat),
            (self.rebalance_interval, self._refresh_and_rebalance),
            (min(self.rebalance_interval, _MEMBERS_CHECK_INTERVAL), self._check_members),
            (self.auto_commit_interval, self.commit_sync),
        ]

    def _service_loop(self, service: ServiceThread) -> None:
        tasks = self._service_tasks()
        due = [time.monotonic() + t[0] for t in tasks]
        while True:
            timeout = max(0.0, min(due) - time.monotonic())
            if service.wait_for_running(timeout) is Woke.STOPPED:
                return
            now = time.monotonic()
            for i, (interval, task) in enumerate(tasks):
                if now >= due[i]:
                    due[i] = now + interval
                    try:
                        task()
                    except RocketHAError as e:
                        log.warning("consumer %s: %s", self.group, e)

    def _all_addrs(self) -> list[str]:
        with self._lock:
            return sorted(
                {
                    a
                    for info in self._routes.values()
                    for g in info.broker_addrs.values()
                    for a in g.values()
                }
            )

    def _heartbeat(self) -> None:
        """``sendHeartbeatToAllBroker``: a consumer heartbeats masters and slaves alike."""
        subscriptions = [(t, *s[:2], self._sub_version) for t, s in self._subscriptions.items()]
        for addr in self._all_addrs():
            try:
                self._api.send_consumer_heartbeat(
                    addr,
                    self.client_id,
                    group=self.group,
                    consume_type=self._consume_type,
                    message_model="CLUSTERING",
                    consume_from_where=self.consume_from_where.value,
                    subscriptions=subscriptions,
                    timeout=self.request_timeout,
                )
            except (RemotingConnectError, SendStatusUnknownError) as e:
                log.info("heartbeat to %s failed: %s", addr, e)

    def _fetch_route(self, topic: str) -> SubscribeInfo | None:
        """The topic's route, or None when the name servers know no such topic (yet)."""
        # From the first name server that answers, in namesrvAddr's order.
        namesrv_addr = ";".join(self.namesrv_addrs)
        try:
            raw = self._api.get_topic_route_info(namesrv_addr, topic, self.request_timeout)
        except RemotingConnectError as e:
            raise MQClientError(str(e)) from None
        if raw is None:
            return None
        info = parse_subscribe_route(topic, raw)
        if not info.queues:
            raise MQClientError(f"topics: topic {topic!r} has no readable queue")
        return info

    def _refresh_routes(self) -> None:
        """``updateTopicRouteInfoFromNameServer``. A topic with no route yet is waited for,
        as RocketMQ's consumers do: it gets no queues until a producer or an admin creates
        it, and is picked up at the next refresh (every ``rebalance_interval`` seconds)."""
        for topic in self.topics:
            info = self._fetch_route(topic)
            if info is None:
                if topic not in self._unrouted:
                    self._unrouted.add(topic)
                    log.warning(
                        "group %s: the name servers know no topic %r yet; waiting for it "
                        "(checked again every %g s)",
                        self.group,
                        topic,
                        self.rebalance_interval,
                    )
                info = SubscribeInfo([], {})
            elif topic in self._unrouted:
                self._unrouted.discard(topic)
                log.info("group %s: topic %r has a route now", self.group, topic)
            with self._lock:
                self._routes[topic] = info

    def _refresh_and_rebalance(self) -> None:
        self._refresh_routes()
        self._heartbeat()
        self._rebalance()

    def _consumer_ids(self) -> list[str]:
        error: Exception | None = None
        now = time.monotonic()
        addrs = self._all_addrs()
        for addr in sorted(addrs, key=lambda a: not self._usable(a, now)):
            try:
                return self._api.get_consumer_id_list_by_group(
                    addr, self.group, self.request_timeout
                )
            except (RemotingConnectError, SendStatusUnknownError) as e:
                error = e
        raise MQClientError(f"no broker listed the consumers of group {self.group}: {error}")

    def _check_members(self) -> None:
        """Rebalances as soon as the group's members change, where RocketMQ's broker would
        send ``NOTIFY_CONSUMER_IDS_CHANGED``: one small request a second."""
        if not self._all_addrs():
            return  # no topic has a route yet: no broker to ask
        if sorted(self._consumer_ids()) != self._members:
            self._rebalance()

    def _rebalance(self) -> None:
        """``RebalanceImpl.rebalanceByTopic`` (clustering) for every topic."""
        if not self._all_addrs():
            return  # no topic has a route yet: nothing to divide
        cids = self._consumer_ids()
        if self.client_id not in cids:
            # A broker that has not had this member's heartbeat (a slave just started, say)
            # would take every queue away; keep them until one that has answers.
            log.info("group %s: %s does not list this consumer yet", self.group, cids)
            self._heartbeat()
            return
        self._members = sorted(cids)
        with self._lock:
            wanted = {
                mq
                for topic in self.topics
                for mq in allocate_message_queue_averagely(
                    self._routes[topic].queues, cids, self.client_id
                )
            }
            removed = [pq for mq, pq in self._queues.items() if mq not in wanted]
            added = [mq for mq in wanted if mq not in self._queues]
        if removed:
            self._commit(oneway=False, only=removed)
        new = {mq: self._start_offset(mq) for mq in sorted(added, key=queue_key)}
        with self._lock:
            for pq in removed:
                pq.dropped = True
                self._queues.pop(pq.mq, None)
            for mq, offset in new.items():
                self._queues[mq] = ProcessQueue(mq, offset, offset, offset)
        self._rebalanced(removed, added)
        if removed or added:
            log.info(
                "rebalance of %s among %d consumers: -%d +%d queues",
                self.group,
                len(cids),
                len(removed),
                len(added),
            )
            self._api.wake_pulled()

    def _leaving(self) -> None:
        """At close, after the last commit (an orderly consumer gives its locks back)."""

    def _rebalanced(self, removed: list[ProcessQueue], added: list[MessageQueue]) -> None:
        """After a rebalance took ``removed`` away and gave ``added`` (an orderly consumer
        gives back and takes their locks)."""

    def _start_offset(self, mq: MessageQueue) -> int:
        """The committed offset, else ``consume_from_where`` (``computePullFromWhere``); from
        the master, or the slave when the master refuses the connection."""
        error: Exception | None = None
        for _attempt in range(2):
            addr = self._offset_target(mq.broker_name, mq.topic)
            if addr is None:
                break
            try:
                return compute_pull_from_where(
                    self._api,
                    addr,
                    self.group,
                    mq,
                    self.consume_from_where,
                    self.consume_timestamp,
                    self.request_timeout,
                )
            except SendStatusUnknownError as e:
                raise MQClientError(f"group {self.group}: the start offset of {mq}: {e}") from e
            except RemotingConnectError as e:
                self._refused(addr, e)
                error = e
        raise MQClientError(f"no broker of {mq.broker_name} answered for {mq}: {error}")

    def _commit(self, *, oneway: bool, only: list[ProcessQueue] | None = None) -> None:
        """``updateConsumeOffsetToBroker`` for every queue whose consumed offset moved."""
        with self._lock:
            todo = [
                (pq, pq.commit_offset())
                for pq in (self._queues.values() if only is None else only)
                if pq.commit_offset() != pq.committed
            ]
        for pq, offset in todo:
            for _attempt in range(2):
                addr = self._offset_target(pq.mq.broker_name, pq.mq.topic)
                if addr is None:
                    break
                try:
                    self._api.update_consumer_offset(
                        addr,
                        self.group,
                        pq.mq.topic,
                        pq.mq.queue_id,
                        offset,
                        oneway=oneway,
                        timeout=self.request_timeout,
                    )
                except RemotingConnectError as e:
                    self._refused(addr, e)
                    continue
                with self._lock:
                    pq.committed = offset
                break


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


__all__ = ["MASTER_ID", "ConsumeFromWhere", "PullConsumer"]
