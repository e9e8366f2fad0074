"""The service thread of a consumer: what RocketMQ's ``MQClientInstance`` runs on its timers for
a consumer (``sendHeartbeatToAllBroker``, ``updateTopicRouteInfoFromNameServer``,
``persistAllConsumerOffset``), its ``RebalanceService`` and ``RebalanceImpl`` (the group's
queues split among its members, a new queue's start offset) and the
``RemoteBrokerOffsetStore`` (offsets committed to the broker group's master, or a slave while
the master is down).

:class:`ConsumerService` is a layer of :class:`~rocketha.consumer.PullConsumer`, on top of its
pull side (:class:`~rocketha.pull_service.PullService`); what it does is described there
(**Rebalance**, **Offsets**). A push consumer adds its tasks (an orderly one renews its queue
locks) through :meth:`ConsumerService._service_tasks`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

from rocketha._service import ServiceThread, Woke
from rocketha.client import MessageQueue
from rocketha.exceptions import (
    MQClientError,
    RemotingConnectError,
    RocketHAError,
    SendStatusUnknownError,
)
from rocketha.process_queue import ProcessQueue
from rocketha.pull_service import PullService
from rocketha.rebalance import (
    ConsumeFromWhere,
    SubscribeInfo,
    allocate_message_queue_averagely,
    compute_pull_from_where,
    parse_subscribe_route,
    queue_key,
)

log = logging.getLogger("rocketha.consumer")

#: Seconds between checks of the group's members (a change rebalances at once).
_MEMBERS_CHECK_INTERVAL = 1.0


class ConsumerService(PullService):
    """The consumer's service thread: heartbeats, routes, rebalance and offset commits."""

    # Set by the consumer's constructor.
    topics: list[str]
    namesrv_addrs: list[str]
    client_id: str
    consume_from_where: ConsumeFromWhere
    consume_timestamp: int
    rebalance_interval: float
    auto_commit_interval: float
    heartbeat_broker_interval: float
    request_timeout: float
    #: ``ConsumeType`` in heartbeats.
    _consume_type: str

    def _init_state(self) -> None:
        """The group's members and the topics without a route: none until the first
        rebalance."""
        super()._init_state()
        #: The group's sorted client ids at the last rebalance.
        self._members: list[str] = []
        #: Topics the name servers had no route for at the last look: waited for, as the Java
        #: consumer waits, and logged once each.
        self._unrouted: set[str] = set()

    # -- the service thread: heartbeats, rebalance, commits --------------------------------

    def _service_tasks(self) -> list[tuple[float, Callable[[], None]]]:
        """(interval, task) the service thread runs."""
        return [
            (self.heartbeat_broker_interval, self._heartbeat),
            (self.rebalance_interval, self._refresh_and_rebalance),
            (min(self.rebalance_interval, _MEMBERS_CHECK_INTERVAL), self._check_members),
            (self.auto_commit_interval, functools.partial(self._commit, oneway=False)),
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


__all__ = ["ConsumerService"]
