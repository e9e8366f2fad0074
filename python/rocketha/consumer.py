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

The consumer is three layers, one module each: this one is what a caller uses (the
constructor, ``poll`` and the other public methods, ``close``);
:mod:`rocketha.consumer_service` is the service thread (heartbeats, routes, rebalance, offset
commits); :mod:`rocketha.pull_service` is the pull thread and the choice of broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence

from rocketha._core import MessageExt
from rocketha._events import cancel_stop_at_exit, stop_at_exit
from rocketha._service import ServiceThread
from rocketha.acl import SessionCredentials, mq_client_api
from rocketha.client import MessageQueue, check_topic_names, namesrv_addrs
from rocketha.consumer_service import ConsumerService
from rocketha.exceptions import (
    MQClientError,
    RemotingConnectError,
    RocketHAError,
    SendStatusUnknownError,
)
from rocketha.process_queue import MASTER_ID
from rocketha.rebalance import ConsumeFromWhere
from rocketha.selector import MessageSelector, check_client_in_broker, subscription_of
from rocketha.send_back import SendBack, producer_options, send_back_target
from rocketha.tls import client_tls

log = logging.getLogger("rocketha.consumer")


class PullConsumer(ConsumerService):
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
        super()._init_state()
        #: Messages polled, by the broker id that served them.
        self._consumed_from: dict[int, int] = {}
        #: The queue the next poll takes from first, so every queue gets its turn.
        self._next_queue = 0
        self._closed = threading.Event()

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

    def waiting_for_master(self) -> set[str]:
        """Broker groups whose queues wait for their master: it is down and the slave serves
        no reads (``slaveReadEnable=false``)."""
        with self._lock:
            return set(self._waiting_for_master)


__all__ = ["MASTER_ID", "ConsumeFromWhere", "PullConsumer"]
