"""Controller mode (``enableControllerMode=true``): RocketMQ 5's own controller, not
``brokerRole``, decides which broker of a group is its master.

:class:`ReplicasManager` (RocketMQ's name) registers the broker with the controllers of
``controllerAddr``, its broker id claimed through ``brokerIdentity`` in the store, and beats;
each decision of the controller is applied to the :class:`~rocketha.Broker`:

* master of a new epoch: the epoch is recorded in ``epochFileCheckpoint`` at the log's end and
  the broker serves AutoSwitch HA. With ``allAckInSyncStateSet=true`` a put waits for every
  slave of its SyncStateSet, so an acknowledged message is on every broker the controller may
  elect next, and its consumers read only what every member holds (the confirm offset, which
  its slaves are told too); with RocketMQ's default (false) it waits for
  ``inSyncReplicas - 1`` slaves, any of them (none unless set), and an election may pick a
  member that lacks the last acknowledged messages. Either way a put is never answered
  SLAVE_NOT_AVAILABLE, and one is refused before it is written while the set holds fewer
  than ``minInSyncReplicas``;
* slave of the master named: AutoSwitch HA from it (its HA address from the name servers), the
  log cut back first to where the two histories agree.

As master it keeps the SyncStateSet as RocketMQ's does: a slave whose ack reached the master's
max offset (and the current epoch) joins; one that stays behind for
``haMaxTimeSlaveNotCatchup`` (15 s) or disconnects leaves; each change goes to the controller
(ALTER_SYNC_STATE_SET) and applies once it answers. It looks when the core tells it that
something changed (a slave outside the set caught up, a slave's connection closed, the
controller decided) and when the first member's ``haMaxTimeSlaveNotCatchup`` runs out; a change
the controller could not take is tried again ``RETRY_INTERVAL_S`` later, and events that come
together are looked at together, at most every ``MIN_LOOK_INTERVAL_S``. Nothing polls.

The controller tells the members of each election at once (NOTIFY_BROKER_ROLE_CHANGED on the
client port); the manager also reads the group's master every ``syncBrokerMetadataPeriod``, for
a notification that was lost.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path
from typing import Protocol

from rocketha import _core
from rocketha._events import EventPump
from rocketha._service import ServiceThread
from rocketha.config import BrokerConfig
from rocketha.exceptions import HAError
from rocketha.ha import HAService
from rocketha.roles import BrokerRole

log = logging.getLogger("rocketha.replicas")

#: After the controller refused or missed a SyncStateSet change, when it is tried again.
RETRY_INTERVAL_S = 1.0
#: The SyncStateSet is looked at no more often than this: the events of a busy group (slaves
#: catching up under load, a controller that keeps a set unchanged) are taken together.
MIN_LOOK_INTERVAL_S = 0.5
#: The decisions' wait when nothing is due: events end it.
_IDLE_WAIT_S = 3600.0

#: What the core tells the master of its slaves, among the decisions.
_SYNC_STATE_EVENTS = frozenset({"CAUGHT_UP", "DISCONNECTED", "WAKE"})


class ReplicatedBroker(Protocol):
    """What the manager reads and drives of a :class:`~rocketha.Broker`."""

    config: BrokerConfig
    role: BrokerRole
    ha: HAService | None

    @property
    def store(self) -> _core.MessageStore: ...

    @property
    def listen_address(self) -> str: ...

    def _change_role(self, role: BrokerRole, broker_id: int) -> None: ...


class ReplicasManager:
    """The controller's decisions for ``broker``; :meth:`start` once its store is open."""

    def __init__(self, broker: ReplicatedBroker) -> None:
        self.broker = broker
        root = Path(broker.config.store_path_root_dir)
        self.epochs = _core.EpochFileCache(root / "epochFileCheckpoint")
        self.identity_path = root / "brokerIdentity"
        self._native: _core.ReplicasManager | None = None
        self._service: ServiceThread | None = None
        self._events: EventPump[tuple[str, str, str, bool]] | None = None
        self._decided = threading.Event()
        #: The broker id the controller gave, once registered.
        self.broker_id: int | None = None
        #: The master's SyncStateSet as the controller last confirmed it (ids).
        self.sync_state_set: set[int] = set()
        #: A change the controller did not take: when to try again (monotonic seconds).
        self._retry_at: float | None = None
        #: When the SyncStateSet was last looked at (monotonic seconds).
        self._last_look = -math.inf
        #: Something happened that the next look must consider.
        self._look_wanted = False

    @property
    def native(self) -> _core.ReplicasManager:
        if self._native is None:
            raise RuntimeError("the replicas manager is not started")
        return self._native

    def start(self) -> None:
        self._native = _core.ReplicasManager(
            self.broker.store,
            self.epochs,
            self.broker.config.native(),
            self.broker.listen_address,
            self.identity_path,
        )
        self._native.start()
        self._events = EventPump("rocketha-replicas-events", self._native.next_events, _log_event)
        self._service = ServiceThread("rocketha-replicas", self._run, wake=self._native.wake)
        self._service.start()

    def wait_for_role(self) -> None:
        """Blocks until the controller made this broker master or slave, saying every 10 s
        what it waits for (RocketMQ's broker waits, fenced, the same way)."""
        while not self._decided.wait(10.0):
            if self._service is None or self._service.stopped:
                return
            log.warning(
                "broker %s still waits for the controllers at %s to name its group's master",
                self.broker.config.broker_name,
                self.broker.config.controller_addr,
            )

    def shutdown(self) -> None:
        self._decided.set()
        if self._service is not None:
            self._service.shutdown()
        if self._native is not None:
            self._native.shutdown()
        if self._events is not None:
            self._events.stop()

    def _run(self, service: ServiceThread) -> None:
        while not service.stopped:
            decisions = self.native.next_decisions(self._next_look_in())
            if service.stopped:
                return
            for decision in decisions:
                self._look_wanted = True
                if decision[0] in _SYNC_STATE_EVENTS:
                    continue
                try:
                    self._apply(*decision)
                except Exception:
                    log.exception("applying the controller's decision %s failed", decision)
            now = time.monotonic()
            if self._last_look + MIN_LOOK_INTERVAL_S > now:
                continue
            if self.broker.role.is_master and self._decided.is_set():
                self._last_look, self._look_wanted, self._retry_at = now, False, None
                try:
                    self._check_sync_state_set()
                except HAError as e:
                    # The controller unreachable or refusing (a partition, a new leader): the
                    # set stays as it was, and the look is made again shortly.
                    log.warning("the SyncStateSet change was not made: %s", e)
                    self._retry_at = now + RETRY_INTERVAL_S
                except Exception:
                    log.exception("keeping the SyncStateSet failed")

    def _next_look_in(self) -> float:
        """Seconds until the SyncStateSet must be looked at: soon after an event (at most
        every ``MIN_LOOK_INTERVAL_S``), else when the first member's
        ``haMaxTimeSlaveNotCatchup`` runs out or a retry is due; long when nothing is."""
        ha = self.broker.ha
        if not self.broker.role.is_master or ha is None or ha.master is None:
            return _IDLE_WAIT_S
        now = time.monotonic()
        not_catchup_s = self.broker.config.ha_max_time_slave_not_catchup / 1000
        ago = dict(ha.master.caught_up())
        # Just past the limit, so the look finds the member behind it.
        due = [
            not_catchup_s - ago[s] + 0.001
            for s in self.sync_state_set - {self.broker_id}
            if s in ago
        ]
        if self._retry_at is not None:
            due.append(self._retry_at - now)
        if self._look_wanted:
            due.append(0.0)
        if not due:
            return _IDLE_WAIT_S
        return max(min(due), self._last_look + MIN_LOOK_INTERVAL_S - now, 0.0)

    def _apply(
        self, kind: str, epoch: int, master: str | None, master_id: int | None, members: list[int]
    ) -> None:
        self.broker_id = self.native.state()[0]
        if kind == "MASTER":
            # Refused (and harmless) when the last epoch wrote nothing: RocketMQ's rule.
            self.epochs.append(epoch, self.broker.store.max_offset)
            self.sync_state_set = set(members)
            self.broker._change_role(BrokerRole.SYNC_MASTER, 0)
            log.info("master of epoch %d, SyncStateSet %s", epoch, sorted(members))
        elif kind == "SLAVE":
            assert self.broker_id is not None
            self.sync_state_set = set()
            self.broker._change_role(BrokerRole.SLAVE, self.broker_id)
            log.info("slave of broker %s at %s in epoch %d", master_id, master, epoch)
        else:
            self.sync_state_set = set(members)
            self.apply_sync_state_set()
        self._decided.set()

    def apply_sync_state_set(self) -> None:
        """Puts follow the set (the broker calls this as it opens its master role): with
        ``allAckInSyncStateSet`` they wait for its slaves, otherwise for any
        ``inSyncReplicas - 1``; below ``minInSyncReplicas`` they are refused."""
        ha = self.broker.ha
        if ha is not None and ha.master is not None:
            # This master's slaves catching up or leaving reach the manager as they happen.
            self.native.watch(ha.master)
            ha.master.set_sync_state_set(
                sorted(self.sync_state_set - {self.broker_id or 0}),
                self.broker.config.all_ack_in_sync_state_set,
            )

    def _check_sync_state_set(self) -> None:
        """RocketMQ's ``maybeExpandInSyncStateSet`` and ``maybeShrinkSyncStateSet``."""
        ha = self.broker.ha
        if ha is None or ha.master is None or self.broker_id is None:
            return
        not_catchup_s = self.broker.config.ha_max_time_slave_not_catchup / 1000
        # Only slaves that reported count, as RocketMQ expands the set on a report: an empty
        # RocketMQ slave reports first after haSendHeartbeatInterval, and a put must not wait
        # on a member whose ack the master has never had.
        acks = {
            c["slave_id"]: c["slave_ack_offset"]
            for c in ha.master.connections()
            if c["slave_id"] is not None and c["last_ack_ms"] is not None
        }
        # How long ago each slave's ack last reached the max offset, kept by the core as the
        # acks come. A member this master never saw catch up stays until it has, as RocketMQ's
        # `maybeShrinkSyncStateSet` keeps a slave with no catch-up time.
        ago = dict(ha.master.caught_up())
        entries = self.epochs.entries()
        epoch_start = entries[-1][1] if entries else 0
        keep = {s for s in self.sync_state_set if s in acks and ago.get(s, 0.0) <= not_catchup_s}
        join = {
            s
            for s, ack in acks.items()
            if ago.get(s, math.inf) <= not_catchup_s and ack >= epoch_start
        }
        wanted = {self.broker_id} | keep | join
        if wanted == self.sync_state_set:
            return
        members, set_epoch = self.native.alter_sync_state_set(sorted(wanted))
        log.info("SyncStateSet %s (epoch %d)", members, set_epoch)
        self.sync_state_set = set(members)
        self.apply_sync_state_set()


def _log_event(event: tuple[str, str, str, bool]) -> None:
    _, kind, reason, problem = event
    log.log(logging.WARNING if problem else logging.INFO, "%s: %s", kind, reason)


__all__ = ["ReplicasManager"]
