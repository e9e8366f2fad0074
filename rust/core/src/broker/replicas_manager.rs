//! RocketMQ 5's `ReplicasManager`: a broker in controller mode (`enableControllerMode`) asks
//! RocketMQ's controller, not its own `brokerRole`, whether it is its group's master.
//!
//! At start it finds the controllers' leader, obtains its broker id (claimed through a
//! temporary identity file, confirmed in `storePathBrokerIdentity`, so a crash mid-claim
//! claims the same id again), registers, and learns the group's master; a group without one
//! asks for an election. From then on it sends a heartbeat every `brokerHeartbeatInterval`,
//! reads the replica info every `syncBrokerMetadataPeriod` and takes the controller's
//! NOTIFY_BROKER_ROLE_CHANGED; every decision with a newer master epoch than the last goes to
//! the broker's [`RoleListener`]: become master of this epoch, or follow that master.

mod controller_api;
mod metadata;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use controller_api::{
    BrokerIdentity, ControllerApi, ControllerError, HeartbeatState, MasterInfo, SyncStateSet,
};
pub use metadata::BrokerMetadata;

use crate::remoting::{response_code, RemotingCommand, ServerEventKind, ServerEvents};
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// How long a failed start waits before the next try (RocketMQ's `RETRY_INTERVAL_SECOND`).
const RETRY_INTERVAL: Duration = Duration::from_secs(5);
/// How often the controller nodes are probed (`scanAvailableControllerAddresses`).
const SCAN_INTERVAL: Duration = Duration::from_secs(3);
/// RocketMQ's start tries to register 5 times in a row before it waits and starts over.
const REGISTER_TRIES: usize = 5;

/// The keys of `broker.conf` a broker in controller mode reads, with RocketMQ's defaults.
#[derive(Debug, Clone)]
pub struct ReplicasConfig {
    pub identity: BrokerIdentity,
    /// `storePathBrokerIdentity` (`storePathRootDir/brokerIdentity`).
    pub identity_path: PathBuf,
    /// `brokerHeartbeatInterval` (1 s).
    pub heartbeat_interval: Duration,
    /// `controllerHeartBeatTimeoutMills` (10 s): silent that long, the broker counts as dead.
    pub controller_heartbeat_timeout: Duration,
    /// `syncBrokerMetadataPeriod` (5 s).
    pub sync_broker_metadata_period: Duration,
    /// `syncControllerMetadataPeriod` (10 s).
    pub sync_controller_metadata_period: Duration,
    /// `brokerElectionPriority`: lower is preferred.
    pub election_priority: i32,
}

/// What the broker does with the controller's decisions, and what it reports back.
pub trait RoleListener: Send + Sync {
    /// This broker is the master of `epoch`, with `set` in sync.
    fn change_to_master(&self, epoch: i32, set: &SyncStateSet);
    /// This broker follows `master_addr` (broker id `master_id`) in `epoch`.
    fn change_to_slave(&self, master_addr: &str, master_id: i64, epoch: i32);
    /// A master's SyncStateSet changed at the controller.
    fn sync_state_set_changed(&self, set: &SyncStateSet);
    /// `(last epoch, max offset, confirm offset)` of the store, for the heartbeats.
    fn offsets(&self) -> (i32, u64, u64);
}

/// What the manager knows, as `rocketha status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaState {
    /// The id the controller gave this broker (`brokerControllerId`).
    pub broker_id: Option<i64>,
    pub master_broker_id: Option<i64>,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set: SyncStateSet,
    /// Registered and the group has a master: the broker may serve its role.
    pub running: bool,
    /// The controllers' leader, as last found.
    pub controller_leader: Option<String>,
}

impl ReplicaState {
    pub fn is_master(&self) -> bool {
        self.broker_id.is_some() && self.master_broker_id == self.broker_id
    }
}

pub struct ReplicasManager {
    api: ControllerApi,
    config: ReplicasConfig,
    state: Mutex<ReplicaState>,
    /// The nodes that answered the last probe; heartbeats go to each.
    available: Mutex<Vec<String>>,
    listener: Arc<dyn RoleListener>,
    events: Arc<ServerEvents>,
    thread: ServiceThread,
}

impl std::fmt::Debug for ReplicasManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicasManager")
            .field("identity", &self.config.identity)
            .field("state", &self.state())
            .finish()
    }
}

impl ReplicasManager {
    pub fn new(
        api: ControllerApi,
        config: ReplicasConfig,
        listener: Arc<dyn RoleListener>,
        events: Arc<ServerEvents>,
    ) -> Self {
        Self {
            available: Mutex::new(api.addrs().to_vec()),
            api,
            config,
            state: Mutex::new(ReplicaState::default()),
            listener,
            events,
            thread: ServiceThread::new("replicas-manager"),
        }
    }

    /// Starts the thread that registers, beats and follows the controller's decisions.
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let me = self.clone();
        self.thread.start(move |waiter| me.run(&waiter))
    }

    pub fn shutdown(&self) {
        self.thread.shutdown();
        self.api.shutdown();
        // Whoever drains the events returns now, with what was queued last.
        self.events.wake();
    }

    pub fn state(&self) -> ReplicaState {
        lock(&self.state).clone()
    }

    fn report(&self, what: &'static str, message: String, problem: bool) {
        let leader = lock(&self.state).controller_leader.clone();
        let addr = leader.unwrap_or_else(|| self.api.addrs().join(";"));
        let kind = ServerEventKind::Processor(what);
        self.events.push(addr, kind, message, problem);
    }

    fn run(&self, waiter: &ServiceWaiter) {
        let now = Instant::now();
        let (mut next_start, mut next_beat, mut next_scan) = (now, now, now);
        let mut next_leader = now;
        let mut next_sync = now + self.config.sync_broker_metadata_period;
        loop {
            let now = Instant::now();
            if now >= next_scan {
                *lock(&self.available) = self.api.available();
                next_scan = now + SCAN_INTERVAL;
            }
            if now >= next_leader {
                self.update_controller_leader();
                next_leader = now + self.config.sync_controller_metadata_period;
            }
            let running = lock(&self.state).running;
            if !running && now >= next_start {
                if let Err(why) = self.start_basic_service() {
                    self.report(
                        "CONTROLLER_START_FAILED",
                        format!("{why}; trying again in {RETRY_INTERVAL:?}"),
                        true,
                    );
                }
                next_start = Instant::now() + RETRY_INTERVAL;
            }
            if now >= next_beat {
                self.send_heartbeat();
                next_beat = now + self.config.heartbeat_interval;
            }
            if running && now >= next_sync {
                self.sync_broker_metadata();
                next_sync = now + self.config.sync_broker_metadata_period;
            }
            let mut due = next_beat.min(next_scan).min(next_leader);
            due = due.min(if running { next_sync } else { next_start });
            if waiter.wait_for_running(Some(due)) == Woke::Stopped {
                return;
            }
        }
    }

    /// `updateControllerMetadata`: the leader, when a node names one.
    fn update_controller_leader(&self) -> Option<String> {
        match self.api.find_leader() {
            Ok(leader) => {
                let mut state = lock(&self.state);
                if state.controller_leader.as_deref() != Some(leader.as_str()) {
                    state.controller_leader = Some(leader.clone());
                    drop(state);
                    self.report(
                        "CONTROLLER_LEADER",
                        format!("the controllers' leader is {leader}"),
                        false,
                    );
                }
                Some(leader)
            }
            Err(e) => {
                self.report("CONTROLLER_LEADER_UNKNOWN", e.to_string(), true);
                None
            }
        }
    }

    fn leader(&self) -> Result<String, ControllerError> {
        let known = lock(&self.state).controller_leader.clone();
        match known {
            Some(leader) => Ok(leader),
            None => self
                .update_controller_leader()
                .ok_or_else(|| ControllerError::NoLeader {
                    addrs: self.api.addrs().join(";"),
                }),
        }
    }

    /// `startBasicService`: registered, then a master for the group (elected if need be).
    fn start_basic_service(&self) -> Result<(), String> {
        let mut last = String::new();
        let registered = (0..REGISTER_TRIES).any(|_| match self.register() {
            Ok(()) => true,
            Err(e) => {
                last = e;
                false
            }
        });
        if !registered {
            return Err(format!(
                "registering with the controller failed {REGISTER_TRIES} times, last: {last}"
            ));
        }
        self.send_heartbeat();
        let has_master = lock(&self.state).master_broker_id.is_some();
        if !has_master {
            self.elect().map_err(|e| e.to_string())?;
        }
        let mut state = lock(&self.state);
        if state.master_broker_id.is_none() {
            return Err("the controller elected no master for the group yet".into());
        }
        state.running = true;
        Ok(())
    }

    /// `register`: the broker id from the identity files or the controller, then
    /// CONTROLLER_REGISTER_BROKER with it.
    fn register(&self) -> Result<(), String> {
        let leader = self.leader().map_err(|e| e.to_string())?;
        let broker_id = self.broker_id(&leader)?;
        lock(&self.state).broker_id = Some(broker_id);
        let info = self
            .api
            .register(&leader, &self.config.identity, broker_id)
            .map_err(|e| self.forget_leader_on(e))?;
        self.change_broker_role(info);
        Ok(())
    }

    /// A request the leader refused as not its own, or that found no one: look again next time.
    fn forget_leader_on(&self, e: ControllerError) -> String {
        if matches!(e, ControllerError::Unreachable { .. })
            || e.code() == Some(response_code::CONTROLLER_NOT_LEADER)
        {
            lock(&self.state).controller_leader = None;
        }
        e.to_string()
    }

    /// The id in `storePathBrokerIdentity`, or one claimed now: GET_NEXT_BROKER_ID, the
    /// temporary file, APPLY_BROKER_ID, then the identity file.
    fn broker_id(&self, leader: &str) -> Result<i64, String> {
        let me = &self.config.identity;
        let path = &self.config.identity_path;
        if let Some(meta) = BrokerMetadata::read(path, false).map_err(|e| e.to_string())? {
            meta.check_group(path, &me.cluster_name, &me.broker_name)
                .map_err(|e| e.to_string())?;
            return Ok(meta.broker_id);
        }
        let temp = metadata::temp_path(path);
        let claim = match BrokerMetadata::read(&temp, true).map_err(|e| e.to_string())? {
            Some(claim) => {
                claim
                    .check_group(&temp, &me.cluster_name, &me.broker_name)
                    .map_err(|e| e.to_string())?;
                claim
            }
            None => {
                let id = self
                    .api
                    .next_broker_id(leader, me)
                    .map_err(|e| self.forget_leader_on(e))?;
                let claim = BrokerMetadata {
                    cluster_name: me.cluster_name.clone(),
                    broker_name: me.broker_name.clone(),
                    broker_id: id,
                    check_code: Some(format!(
                        "{};{}",
                        me.broker_addr,
                        crate::protocol::now_millis()
                    )),
                };
                claim.write(&temp).map_err(|e| e.to_string())?;
                claim
            }
        };
        let code = claim.check_code.as_deref().unwrap_or_default();
        if let Err(e) = self.api.apply_broker_id(leader, me, claim.broker_id, code) {
            // Another broker took it: the next try asks for a fresh id.
            metadata::remove(&temp).map_err(|e| e.to_string())?;
            return Err(self.forget_leader_on(e));
        }
        let confirmed = BrokerMetadata {
            check_code: None,
            ..claim
        };
        confirmed.write(path).map_err(|e| e.to_string())?;
        metadata::remove(&temp).map_err(|e| e.to_string())?;
        self.report(
            "CONTROLLER_BROKER_ID",
            format!(
                "the controller gave this broker id {} ({})",
                confirmed.broker_id,
                path.display()
            ),
            false,
        );
        Ok(confirmed.broker_id)
    }

    /// `brokerElect`: asks for an election; the answer names the master, whoever won.
    fn elect(&self) -> Result<(), ControllerError> {
        let leader = self.leader()?;
        let Some(id) = lock(&self.state).broker_id else {
            return Ok(());
        };
        let info = self.api.elect(&leader, &self.config.identity, id)?;
        self.change_broker_role(info);
        Ok(())
    }

    /// `sendHeartbeatToController`, once this broker has an id.
    fn send_heartbeat(&self) {
        let Some(broker_id) = lock(&self.state).broker_id else {
            return;
        };
        let (epoch, max_offset, confirm_offset) = self.listener.offsets();
        let state = HeartbeatState {
            broker_id: Some(broker_id),
            epoch,
            max_offset,
            confirm_offset,
            heartbeat_timeout: self.config.controller_heartbeat_timeout,
            election_priority: self.config.election_priority,
        };
        let addrs = lock(&self.available).clone();
        self.api.heartbeat(&addrs, &self.config.identity, state);
    }

    /// `schedulingSyncBrokerMetadata`: a newer master epoch is followed, a group without a
    /// master gets an election, and a master takes its newer SyncStateSet.
    fn sync_broker_metadata(&self) {
        let result = self.leader().and_then(|leader| {
            self.api
                .replica_info(&leader, &self.config.identity.broker_name)
        });
        match result {
            Ok(info) => {
                let known = lock(&self.state).master_epoch;
                if info.master_epoch > known && info.master_broker_id.is_none() {
                    if let Err(e) = self.elect() {
                        self.report("CONTROLLER_ELECT_FAILED", e.to_string(), true);
                    }
                } else {
                    self.change_broker_role(info);
                }
            }
            Err(e) if e.code() == Some(response_code::CONTROLLER_BROKER_METADATA_NOT_EXIST) => {
                // The controller lost this group (cleaned, or a new controller): register again.
                if let Err(why) = self.register() {
                    self.report("CONTROLLER_REGISTER_FAILED", why, true);
                }
            }
            Err(e) => {
                let why = self.forget_leader_on(e);
                self.report("CONTROLLER_SYNC_FAILED", why, true);
            }
        }
    }

    /// NOTIFY_BROKER_ROLE_CHANGED (`AdminBrokerProcessor.notifyBrokerRoleChanged`): the
    /// controller leader's word on an election, so no member waits for its next
    /// `syncBrokerMetadataPeriod` to learn of it. The request is oneway: nothing answers it.
    pub(crate) fn notify_broker_role_changed(&self, request: &RemotingCommand, from: &str) {
        match MasterInfo::from_notification(request) {
            Ok(info) => self.change_broker_role(info),
            Err(why) => self.report(
                "NOTIFY_BROKER_ROLE_CHANGED",
                format!("ignored a role change from {from}: {why}"),
                true,
            ),
        }
    }

    /// `changeBrokerRole`: a decision of a newer epoch makes this broker master or slave;
    /// one of the same epoch may bring a master a newer SyncStateSet. The controller's
    /// NOTIFY_BROKER_ROLE_CHANGED arrives here too.
    pub fn change_broker_role(&self, info: MasterInfo) {
        // The listener hears each decision under the lock, so two of them (the poll's and the
        // controller's notification) reach the broker in the order of their epochs.
        let mut state = lock(&self.state);
        let (Some(master_id), Some(master_addr)) =
            (info.master_broker_id, info.master_address.clone())
        else {
            return;
        };
        if info.master_epoch < state.master_epoch {
            return;
        }
        if info.master_epoch == state.master_epoch {
            let newer = info.sync_state_set.sync_state_set_epoch
                > state.sync_state_set.sync_state_set_epoch;
            if state.is_master() && newer {
                state.sync_state_set = info.sync_state_set.clone();
                self.listener.sync_state_set_changed(&info.sync_state_set);
            }
            return;
        }
        state.master_epoch = info.master_epoch;
        state.master_broker_id = Some(master_id);
        state.master_address = Some(master_addr.clone());
        state.sync_state_set = info.sync_state_set.clone();
        let epoch = info.master_epoch;
        let role = if state.broker_id == Some(master_id) {
            self.listener.change_to_master(epoch, &info.sync_state_set);
            format!(
                "master of epoch {epoch}, SyncStateSet {:?}",
                info.sync_state_set.sync_state_set
            )
        } else {
            self.listener
                .change_to_slave(&master_addr, master_id, epoch);
            format!("slave of broker {master_id} at {master_addr} in epoch {epoch}")
        };
        drop(state);
        self.report("CONTROLLER_ROLE", role, false);
    }

    /// `doReportSyncStateSetChanged`: a master proposes `members` as its new SyncStateSet;
    /// the controller's answer (with its new epoch) is the set from now on.
    pub fn alter_sync_state_set(
        &self,
        members: std::collections::BTreeSet<i64>,
    ) -> Result<SyncStateSet, ControllerError> {
        let (master_id, master_epoch, current) = {
            let state = lock(&self.state);
            let Some(id) = state.broker_id.filter(|_| state.is_master()) else {
                return Ok(state.sync_state_set.clone());
            };
            (
                id,
                state.master_epoch,
                state.sync_state_set.sync_state_set_epoch,
            )
        };
        let proposal = SyncStateSet {
            sync_state_set: members,
            sync_state_set_epoch: current,
        };
        let leader = self.leader()?;
        let name = &self.config.identity.broker_name;
        let accepted =
            self.api
                .alter_sync_state_set(&leader, name, master_id, master_epoch, &proposal)?;
        let mut state = lock(&self.state);
        if accepted.sync_state_set_epoch > state.sync_state_set.sync_state_set_epoch {
            state.sync_state_set = accepted.clone();
        }
        Ok(accepted)
    }
}
