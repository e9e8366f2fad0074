"""Transactional messages, RocketMQ's ``TransactionMQProducer``: a message and a local
transaction (an order written to a database, say) succeed or fail together.

:meth:`rocketha.Producer.send_in_transaction` sends the message as a *half message*, which no
consumer sees, runs ``execute`` (the local transaction), then tells the broker its outcome:
:attr:`TransactionState.COMMIT` delivers the message, :attr:`TransactionState.ROLLBACK`
drops it. When the outcome is :attr:`TransactionState.UNKNOWN`, or the producer died before
telling, the broker asks the producer group later (*check-back*, every
``transactionCheckInterval`` once ``transactionTimeOut`` has passed, up to
``transactionCheckMax`` times, then it discards the message): ``check`` answers for the
message in hand, the producer's ``check_transaction`` for any other (a message sent before a
restart). A check that answers ``UNKNOWN`` is asked again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from enum import StrEnum

from rocketha import _core
from rocketha._core import Message, MessageExt
from rocketha._service import ServiceThread
from rocketha.exceptions import (
    CommitLogCorrupted,
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    SendStatusUnknownError,
)

log = logging.getLogger("rocketha.transaction")

#: ``MessageConst.PROPERTY_TRANSACTION_PREPARED`` and ``PROPERTY_PRODUCER_GROUP``.
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
#: ``RequestCode.END_TRANSACTION``.
END_TRANSACTION = 37
#: How long a waiting check thread sleeps between looks at whether its producer closed.
_CHECK_POLL = 0.2


class TransactionState(StrEnum):
    """``LocalTransactionState``: what the local transaction did."""

    COMMIT = "COMMIT_MESSAGE"
    ROLLBACK = "ROLLBACK_MESSAGE"
    #: Not known yet: the broker checks back later.
    UNKNOWN = "UNKNOW"

    @property
    def sys_flag(self) -> int:
        """``MessageSysFlag``'s ``commitOrRollback`` value of END_TRANSACTION."""
        return {"COMMIT_MESSAGE": 0x2 << 2, "ROLLBACK_MESSAGE": 0x3 << 2}.get(self.value, 0)


#: The local transaction, run between the half send and its end.
Execute = Callable[[Message], TransactionState]
#: Answers a check-back for a half message.
Check = Callable[[MessageExt], TransactionState]


def half_message(msg: Message, group: str) -> Message:
    """``msg`` as a half message of ``group`` (``TRAN_MSG``, ``PGROUP``); a delay is refused,
    as a transactional message is delivered when committed."""
    properties: dict[str, object] = dict(msg.properties)
    if properties.get("DELAY", "0") not in ("", "0") or any(
        k.startswith("TIMER_") for k in properties
    ):
        raise MQClientError(
            "a transactional message cannot be delayed: it is delivered when committed "
            "(remove DELAY and the TIMER_ properties)"
        )
    properties[PROPERTY_TRANSACTION_PREPARED] = "true"
    properties[PROPERTY_PRODUCER_GROUP] = group
    return Message(msg.topic, msg.body, properties=properties, queue_id=msg.queue_id, flag=msg.flag)


def state_of(outcome: object, what: str) -> TransactionState:
    """A callback's answer, which must be a :class:`TransactionState`."""
    if isinstance(outcome, TransactionState):
        return outcome
    raise MQClientError(
        f"{what} must return a TransactionState (COMMIT, ROLLBACK or UNKNOWN), got {outcome!r}"
    )


def end_fields(group: str, msg_id: str, offset_msg_id: str, queue_offset: int) -> dict[str, str]:
    """END_TRANSACTION's header for the half message a send stored (``endTransaction``): its
    queue offset, and its commit log offset, the last 16 hex digits of its offset msgId."""
    return {
        "producerGroup": group,
        "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(int(offset_msg_id[-16:], 16)),
        "fromTransactionCheck": "false",
        "msgId": msg_id,
        "transactionId": msg_id,
    }


def end_transaction(
    api: _core.MQClientAPI,
    addr: str,
    fields: dict[str, str],
    state: TransactionState,
    timeout: float,
) -> None:
    """END_TRANSACTION of ``state`` to the broker at ``addr``. Unlike Java's oneway end, it is
    answered, so a commit the broker refused is an error here; UNKNOWN sends nothing (the
    broker will check back)."""
    if state is TransactionState.UNKNOWN:
        return
    code, remark, _, _ = api.invoke_admin(
        addr,
        END_TRANSACTION,
        ext_fields={**fields, "commitOrRollback": str(state.sys_flag)},
        body=b"",
        timeout=timeout,
    )
    if code != 0:
        raise MQBrokerError(code, remark or "", addr)


class TransactionChecker:
    """``ClientRemotingProcessor.checkTransactionState`` for one producer: a thread takes the
    brokers' check-backs and answers each with END_TRANSACTION (``fromTransactionCheck``)."""

    def __init__(
        self, api: _core.MQClientAPI, group: str, default: Check | None, timeout: float
    ) -> None:
        self._api = api
        self._group = group
        self._default = default
        self._timeout = timeout
        #: Transaction id -> the ``check`` given with its send, while this process lives.
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: ServiceThread | None = None

    def start(self) -> None:
        """Starts the thread that answers check-backs, once."""
        with self._lock:
            if self._thread is None and not self._closed.is_set():
                self._thread = ServiceThread(f"rocketha-transaction-check-{self._group}", self._run)
                self._thread.start()

    def expect(self, transaction_id: str, check: Check | None) -> None:
        """``check`` answers for ``transaction_id`` from now on (the producer's default when
        None); starts the thread."""
        if check is not None:
            with self._lock:
                self._checks[transaction_id] = check
        self.start()

    def ended(self, transaction_id: str) -> None:
        with self._lock:
            self._checks.pop(transaction_id, None)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(timeout=self._timeout + 1)

    def _run(self, service: ServiceThread) -> None:
        # Nothing wakes `next_transaction_check`: a stop is seen within `_CHECK_POLL`.
        while not service.stopped:
            try:
                request = self._api.next_transaction_check(_CHECK_POLL)
            except CommitLogCorrupted as e:
                log.warning("transaction check unreadable: %s", e)
                continue
            if request is not None:
                self._answer(*request)

    def _answer(self, addr: str, header: dict[str, str], msg: MessageExt) -> None:
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP)
        if group != self._group:
            log.debug("check of group %s is not for producer group %s", group, self._group)
            return
        transaction_id = header.get("transactionId") or msg.properties.get("UNIQ_KEY", "")
        with self._lock:
            check = self._checks.get(transaction_id, self._default)
        if check is None:
            log.warning(
                "broker %s checks transaction %s, but the producer has no check: give "
                "send_in_transaction a check, or the Producer a check_transaction",
                addr,
                transaction_id,
            )
            return
        try:
            state = state_of(check(msg), "check")
        except Exception:
            log.exception("check of transaction %s failed; the broker asks again", transaction_id)
            return
        fields = {
            "producerGroup": self._group,
            "tranStateTableOffset": header.get("tranStateTableOffset", "0"),
            "commitLogOffset": header.get("commitLogOffset", "0"),
            "fromTransactionCheck": "true",
            "msgId": msg.properties.get("UNIQ_KEY", header.get("msgId", "")),
            "transactionId": transaction_id,
        }
        try:
            end_transaction(self._api, addr, fields, state, self._timeout)
        except (MQBrokerError, RemotingConnectError, SendStatusUnknownError) as e:
            log.warning("ending transaction %s after its check failed: %s", transaction_id, e)
            return
        if state is not TransactionState.UNKNOWN:
            self.ended(transaction_id)
