"""The administration side of a RocketMQ client (``DefaultMQAdminExt``), for programs without
Java: finding messages by key or by msgId, in every broker group of a topic, against rocketha's
brokers and RocketMQ's alike.

    >>> with Admin("127.0.0.1:9876") as admin:          # doctest: +SKIP
    ...     for msg in admin.find("orders", "ORDER-42"):
    ...         print(msg.queue_id, msg.queue_offset, msg.body)
"""

from __future__ import annotations

import json

from rocketha._core import MessageExt
from rocketha.acl import SessionCredentials, mq_client_api
from rocketha.client import check_topic, namesrv_addrs
from rocketha.exceptions import MQClientError, RemotingConnectError

#: ``Long.MAX_VALUE``: no upper bound on the store time.
_FOREVER = 2**63 - 1
#: ``maxMsgsNumBatch``: the most messages one broker answers a key query with.
MAX_QUERY_NUM = 64


class Admin:
    """Finds messages as ``mqadmin queryMsgByKey`` and ``queryMsgByUniqueKey`` do: a
    QUERY_MESSAGE to each broker group of the topic (its master, or a slave when the master is
    down), answered from the broker's index of ``KEYS`` and ``UNIQ_KEY``."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        timeout: float = 3.0,
        client_ip: str = "127.0.0.1",
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.namesrv_addrs = namesrv_addrs(namesrv_addr)
        self.timeout = timeout
        self._api = mq_client_api(client_ip, credentials)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._api.close()

    def find(
        self,
        topic: str,
        key: str,
        *,
        begin: int = 0,
        end: int = _FOREVER,
        max_num: int = MAX_QUERY_NUM,
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` among their keys, stored between ``begin`` and
        ``end`` (ms since the epoch), oldest first: up to ``max_num`` per broker group (a
        broker answers at most 64)."""
        found = self._query(topic, key, max_num, begin, end, unique=False)
        return [m for m in found if key in m.keys]

    def find_by_id(self, topic: str, msg_id: str) -> MessageExt | None:
        """The message whose msgId (``SendResult.msg_id``, its ``UNIQ_KEY``) is ``msg_id``."""
        found = self._query(topic, msg_id, 32, 0, _FOREVER, unique=True)
        return next((m for m in found if m.properties.get("UNIQ_KEY") == msg_id), None)

    def _query(
        self, topic: str, key: str, max_num: int, begin: int, end: int, *, unique: bool
    ) -> list[MessageExt]:
        check_topic(topic)
        if not key:
            raise ValueError("the key to find is empty")
        if begin > end:
            raise ValueError(f"begin {begin} is after end {end}")
        out: list[MessageExt] = []
        for addrs in self._brokers(topic):
            out.extend(self._ask_group(addrs, topic, key, max_num, begin, end, unique))
        return sorted(out, key=lambda m: (m.store_timestamp, m.store_host, m.commitlog_offset))

    def _ask_group(
        self,
        addrs: list[str],
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        unique: bool,
    ) -> list[MessageExt]:
        """The group's answer from its master or, when that cannot be reached (dead, but still
        in the route until the name server notices), from its slaves in broker id order: each
        holds the index its replication built."""
        failures = []
        for addr in addrs:
            try:
                return self._api.query_message(
                    addr,
                    topic=topic,
                    key=key,
                    max_num=max_num,
                    begin=begin,
                    end=end,
                    unique=unique,
                    timeout=self.timeout,
                )
            except RemotingConnectError as e:
                failures.append(f"{addr}: {e}")
        raise MQClientError(f"no broker of the group could be asked: {'; '.join(failures)}")

    def _brokers(self, topic: str) -> list[list[str]]:
        """Per broker group of the topic, its addresses: the master first (RocketMQ's
        ``BrokerData.selectBrokerAddr``), then the slaves."""
        try:
            raw = self._api.get_topic_route_info(";".join(self.namesrv_addrs), topic, self.timeout)
        except RemotingConnectError as e:
            raise MQClientError(str(e)) from None
        if raw is None:
            raise MQClientError(
                f"no route for topic {topic!r}: the name servers know no such topic"
            )
        out = []
        for broker in json.loads(raw).get("brokerDatas") or []:
            addrs = {int(k): v for k, v in (broker.get("brokerAddrs") or {}).items()}
            if addrs:
                out.append([addrs[i] for i in sorted(addrs)])
        return out


__all__ = ["MAX_QUERY_NUM", "Admin"]
