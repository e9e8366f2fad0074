"""RocketMQ's ``MessageSelector``: what a consumer subscribes to, by tag or by SQL92.

>>> PullConsumer(namesrv, "cg", "orders", subscription=MessageSelector.by_sql("a > 5"))

A plain string subscription is a TAG expression (``"*"`` or ``"a || b"``). A SQL92 selector is
evaluated by the broker over each message's properties (user properties and system ones such
as ``TAGS``), and needs ``enablePropertyFilter=true`` on every broker of the topic; the
consumer asks each broker at start (``CHECK_CLIENT_CONFIG``), so a broker that refuses it, or a
malformed expression, fails the consumer's constructor with the broker's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rocketha import _core
from rocketha.exceptions import MQClientError, RemotingConnectError, SendStatusUnknownError
from rocketha.rebalance import SubscribeInfo

#: ``ExpressionType``.
TAG = "TAG"
SQL92 = "SQL92"


@dataclass(frozen=True)
class MessageSelector:
    """``MessageSelector.bySql`` / ``byTag``: an expression and its type."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """Messages whose properties make ``sql`` TRUE (RocketMQ's SQL92 subset)."""
        return cls(SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str) -> MessageSelector:
        """Messages tagged as ``tag`` says: ``"*"`` or ``"a || b"``."""
        return cls(TAG, tag)


class Subscription(NamedTuple):
    """A topic's subscription as the consumer sends and applies it."""

    expression: str
    expression_type: str
    #: Tags a message must carry one of; empty for every message (and for SQL92, which the
    #: broker alone filters by).
    tags: list[str]


def subscription_of(topic: str, selector: str | MessageSelector) -> Subscription:
    """Checks ``selector`` as the broker will read it; MQClientError names the problem."""
    if isinstance(selector, str):
        selector = MessageSelector.by_tag(selector)
    try:
        expression, tags = _core.parse_subscription(
            topic, selector.expression, selector.expression_type
        )
    except ValueError as e:
        raise MQClientError(f"subscription: {e}") from None
    return Subscription(expression, selector.expression_type, tags)


def check_client_in_broker(
    api: _core.MQClientAPI,
    client_id: str,
    group: str,
    subscriptions: dict[str, Subscription],
    routes: dict[str, SubscribeInfo],
    timeout: float,
) -> None:
    """``checkClientInBroker``: each broker of a topic subscribed by other than TAG is asked
    whether it takes the expression; the first refusal raises MQClientError with its reason."""
    for topic, sub in subscriptions.items():
        route = routes.get(topic)
        if sub.expression_type == TAG or route is None:
            continue
        for addr in (a for by_id in route.broker_addrs.values() for a in by_id.values()):
            try:
                api.check_client_config(
                    addr,
                    client_id,
                    group=group,
                    topic=topic,
                    expression=sub.expression,
                    expression_type=sub.expression_type,
                    timeout=timeout,
                )
            except RemotingConnectError:
                continue  # a broker down now is checked by its pulls' answers
            except SendStatusUnknownError as e:
                raise MQClientError(
                    f"check client in broker error, maybe because you use "
                    f"{sub.expression_type} to filter message, but the broker does not "
                    f"support it: {e}"
                ) from None
