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
(ALTER_SYNC_STATE_SET) and applies once it answers.

The controller tells the members of each election at once (NOTIFY_BROKER_ROLE_CHANGED on the
client port); the manager also reads the group's master every ``syncBrokerMetadataPeriod``, for
a notification that was lost.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Protocol

from rocketha import _core
from rocketha.config import BrokerConfig
from rocketha.exceptions import HAError
from rocketha.ha import HAService
from rocketha.roles import BrokerRole

log = logging.getLogger("rocketha.replicas")

#: How often the master looks at its slaves' acks for the SyncStateSet.
CHECK_INTERVAL_S = 0.5


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
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._decided = threading.Event()
        #: The broker id the controller gave, once registered.
        self.broker_id: int | None = None
        #: The master's SyncStateSet as the controller last confirmed it (ids).
        self.sync_state_set: set[int] = set()
        #: When each slave's ack last reached the master's max offset (monotonic seconds).
        self._caught_up: dict[int, float] = {}

    @property
    def native(self) -> _core.ReplicasManager:
        if self._native is None:
            raise RuntimeError("the replicas manager is not started")
        return self._native

    def start(self) -> None:
        c = self.broker.config
        self._native = _core.ReplicasManager(
            self.broker.store,
            self.epochs,
            c.controller_addr,
            c.broker_cluster_name,
            c.broker_name,
            self.broker.listen_address,
            self.identity_path,
            heartbeat_interval_ms=c.broker_heartbeat_interval,
            controller_heartbeat_timeout_ms=c.controller_heart_beat_timeout_mills,
            sync_broker_metadata_period_ms=c.sync_broker_metadata_period,
            sync_controller_metadata_period_ms=c.sync_controller_metadata_period,
            election_priority=c.broker_election_priority,
        )
        self._native.start()
        self._thread = threading.Thread(target=self._run, name="rocketha-replicas", daemon=True)
        self._thread.start()

    def wait_for_role(self) -> None:
        """Blocks until the controller made this broker master or slave, saying every 10 s
        what it waits for (RocketMQ's broker waits, fenced, the same way)."""
        while not self._decided.wait(10.0):
            if self._stop.is_set():
                return
            log.warning(
                "broker %s still waits for the controllers at %s to name its group's master",
                self.broker.config.broker_name,
                self.broker.config.controller_addr,
            )

    def shutdown(self) -> None:
        self._stop.set()
        self._decided.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._native is not None:
            self._native.shutdown()

    def _run(self) -> None:
        while not self._stop.is_set():
            for decision in self.native.next_decisions(CHECK_INTERVAL_S):
                if self._stop.is_set():
                    return
                try:
                    self._apply(*decision)
                except Exception:
                    log.exception("applying the controller's decision %s failed", decision)
            for _, kind, reason, problem in self.native.next_events(0.0):
                log.log(logging.WARNING if problem else logging.INFO, "%s: %s", kind, reason)
            if self.broker.role.is_master and self._decided.is_set():
                try:
                    self._check_sync_state_set()
                except HAError as e:
                    # The controller unreachable or refusing (a partition, a new leader): the
                    # set stays as it was, and the next look tries again.
                    log.warning("the SyncStateSet change was not made: %s", e)
                except Exception:
                    log.exception("keeping the SyncStateSet failed")

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
            ha.master.set_sync_state_set(
                sorted(self.sync_state_set - {self.broker_id or 0}),
                self.broker.config.all_ack_in_sync_state_set,
            )

    def _check_sync_state_set(self) -> None:
        """RocketMQ's ``maybeExpandInSyncStateSet`` and ``maybeShrinkSyncStateSet``."""
        ha = self.broker.ha
        if ha is None or ha.master is None or self.broker_id is None:
            return
        now = time.monotonic()
        not_catchup_s = self.broker.config.ha_max_time_slave_not_catchup / 1000
        max_offset = self.broker.store.max_offset
        # Only slaves that reported count, as RocketMQ expands the set on a report: an empty
        # RocketMQ slave reports first after haSendHeartbeatInterval, and a put must not wait
        # on a member whose ack the master has never had.
        acks = {
            c["slave_id"]: c["slave_ack_offset"]
            for c in ha.master.connections()
            if c["slave_id"] is not None and c["last_ack_ms"] is not None
        }
        for slave, ack in acks.items():
            if ack >= max_offset:
                self._caught_up[slave] = now
        entries = self.epochs.entries()
        epoch_start = entries[-1][1] if entries else 0
        keep = {
            s
            for s in self.sync_state_set
            if s in acks and now - self._caught_up.get(s, now) <= not_catchup_s
        }
        join = {s for s, ack in acks.items() if ack >= max_offset and ack >= epoch_start}
        wanted = {self.broker_id} | keep | join
        if wanted == self.sync_state_set:
            return
        members, set_epoch = self.native.alter_sync_state_set(sorted(wanted))
        log.info("SyncStateSet %s (epoch %d)", members, set_epoch)
        self.sync_state_set = set(members)
        self.apply_sync_state_set()


__all__ = ["ReplicasManager"]
