"""What a consumer keeps per assigned queue, RocketMQ's ``ProcessQueue``, and what each pull
in flight was for.

A :class:`ProcessQueue` holds the lite consumer's three offsets: the next one to pull, the one
past the last message :meth:`~rocketha.consumer.PullConsumer.poll` returned (what a commit
stores), and the last one committed; with the pulled messages not polled yet and the broker
the last answer suggested. A push consumer also keeps the messages its handlers hold: a commit
stores the lowest of those (``ProcessQueue.removeMessage``), so nothing past a message still
being consumed is committed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rocketha._core import MessageExt
from rocketha.client import MessageQueue

#: ``MixAll.MASTER_ID``.
MASTER_ID = 0


@dataclass
class ProcessQueue:
    """``ProcessQueue`` with the lite consumer's offsets: what is pulled, polled, committed."""

    mq: MessageQueue
    #: Next offset to pull.
    next_offset: int
    #: Offset after the last message :meth:`~rocketha.consumer.PullConsumer.poll` returned: what a
    #: commit stores.
    consumed: int
    committed: int
    #: Pulled messages not polled yet, with the id of the broker that served each.
    cache: deque[tuple[MessageExt, int]] = field(default_factory=deque)
    #: ``suggestWhichBrokerId`` of the last answer.
    broker_id: int = MASTER_ID
    in_flight: bool = False
    #: Bumped by a seek: answers to older pulls are dropped.
    generation: int = 0
    not_before: float = 0.0
    dropped: bool = False
    #: A push consumer's messages taken for its handlers and not done yet, by queue offset.
    processing: dict[int, MessageExt] = field(default_factory=dict)
    #: An orderly consumer's: when the broker last confirmed this client's lock on the queue
    #: (monotonic; None: not locked), until when a failure suspends it, and the failed
    #: attempts of each message by queue offset.
    locked_at: float | None = None
    suspended_until: float = 0.0
    attempts: dict[int, int] = field(default_factory=dict)

    def commit_offset(self) -> int:
        """What a commit stores: the lowest offset still being consumed, else ``consumed``."""
        return min(self.processing, default=self.consumed)


@dataclass(frozen=True)
class PullInFlight:
    """What a pull ticket was for: the queue, its generation when sent, and the broker."""

    pq: ProcessQueue
    generation: int
    broker_id: int
    addr: str


__all__ = ["MASTER_ID", "ProcessQueue", "PullInFlight"]
