//! The controller half of RocketMQ's `BrokerOuterAPI`: the requests a broker in controller
//! mode makes of RocketMQ 5's controller, over one client for every controller node.
//!
//! Only the Raft leader of the controllers answers the requests that change or read the
//! groups; any node says who the leader is (CONTROLLER_GET_METADATA_INFO). Heartbeats go to
//! every node that answers, as RocketMQ's broker sends them.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::protocol::json::{parse_lenient, to_json, JsonStyle};
use crate::protocol::now_millis;
use crate::remoting::header::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, MasterInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
};
use crate::remoting::{
    request_code, response_code, ClientConfig, ClientTls, CustomHeader, NettyRemotingClient,
    RemotingCommand,
};

/// RocketMQ's BrokerOuterAPI waits 3 s for each controller request.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(3);

/// What went wrong with a controller request: the controller's own answer, or no answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ControllerError {
    #[error("controller {addr}: {what} answered code {code}: {remark}")]
    Refused {
        addr: String,
        what: &'static str,
        code: i32,
        remark: String,
    },
    #[error("controller {addr}: {what}: {why}")]
    Unreachable {
        addr: String,
        what: &'static str,
        why: String,
    },
    #[error("no controller of {addrs} names a leader")]
    NoLeader { addrs: String },
}

impl ControllerError {
    pub(crate) fn code(&self) -> Option<i32> {
        match self {
            ControllerError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// `SyncStateSet`: the members that are caught up with the master, with the epoch of this
/// version of the set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SyncStateSet {
    pub sync_state_set: BTreeSet<i64>,
    pub sync_state_set_epoch: i32,
}

/// `ElectMasterResponseBody`: the SyncStateSet is all a broker reads of it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ElectMasterResponseBody {
    sync_state_set: BTreeSet<i64>,
}

/// The group's master as the controller knows it, and the SyncStateSet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterInfo {
    pub master_broker_id: Option<i64>,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set: SyncStateSet,
}

impl MasterInfo {
    fn new(header: MasterInfoResponseHeader, sync_state_set: SyncStateSet) -> Self {
        Self {
            master_broker_id: header.master_broker_id,
            // An empty address is RocketMQ's "no master" as much as a missing one.
            master_address: header.master_address.filter(|a| !a.is_empty()),
            master_epoch: header.master_epoch.unwrap_or(0),
            sync_state_set: SyncStateSet {
                sync_state_set_epoch: header
                    .sync_state_set_epoch
                    .unwrap_or(sync_state_set.sync_state_set_epoch),
                ..sync_state_set
            },
        }
    }

    /// The decision in a NOTIFY_BROKER_ROLE_CHANGED the controller sent this broker.
    pub(crate) fn from_notification(request: &RemotingCommand) -> Result<Self, String> {
        let what = "NOTIFY_BROKER_ROLE_CHANGED";
        let header: MasterInfoResponseHeader = request
            .decode_custom_header()
            .map_err(|e| format!("{what}: {e}"))?;
        if header.master_epoch.is_none() {
            return Err(format!("{what} without masterEpoch"));
        }
        let set: SyncStateSet = if request.body.is_empty() {
            SyncStateSet::default()
        } else {
            parse_lenient(&request.body, what)
                .map_err(|e| format!("{what}: a malformed body: {e}"))?
        };
        Ok(Self::new(header, set))
    }
}

/// `call` on every node at once, the answers in the nodes' order: a node that is down (or
/// silent) costs one connect or request timeout in all, not one before each of the others, so
/// it never delays the heartbeats to the live nodes past the controller's timeout.
fn each_node<T: Send>(addrs: &[String], call: impl Fn(&str) -> T + Sync) -> Vec<T> {
    std::thread::scope(|scope| {
        let calls: Vec<_> = addrs
            .iter()
            .map(|addr| {
                let call = &call;
                scope.spawn(move || call(addr))
            })
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Who this broker is, as every controller request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub cluster_name: String,
    pub broker_name: String,
    /// `brokerIP1:listenPort`, the address the controller hands to the group's members.
    pub broker_addr: String,
}

/// What a heartbeat tells the controller's election about this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatState {
    pub broker_id: Option<i64>,
    pub epoch: i32,
    pub max_offset: u64,
    pub confirm_offset: u64,
    pub heartbeat_timeout: Duration,
    pub election_priority: i32,
}

/// A client of the controller nodes of `controllerAddr`.
pub struct ControllerApi {
    addrs: Vec<String>,
    client: NettyRemotingClient,
}

impl ControllerApi {
    pub fn new(addrs: Vec<String>, tls: Option<ClientTls>) -> std::io::Result<Self> {
        let client = NettyRemotingClient::start(ClientConfig {
            connect_timeout: CONTROLLER_TIMEOUT,
            tls,
            ..ClientConfig::default()
        })?;
        Ok(Self { addrs, client })
    }

    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    fn invoke(
        &self,
        addr: &str,
        what: &'static str,
        request: RemotingCommand,
        accept: &[i32],
    ) -> Result<RemotingCommand, ControllerError> {
        let response = self
            .client
            .invoke_sync(addr, request, CONTROLLER_TIMEOUT)
            .map_err(|e| ControllerError::Unreachable {
                addr: addr.to_owned(),
                what,
                why: e.to_string(),
            })?;
        if response.code == response_code::SUCCESS || accept.contains(&response.code) {
            return Ok(response);
        }
        Err(ControllerError::Refused {
            addr: addr.to_owned(),
            what,
            code: response.code,
            remark: response.remark.unwrap_or_default(),
        })
    }

    fn request<H: CustomHeader>(code: i32, header: &H) -> RemotingCommand {
        let mut request = RemotingCommand::request(code, 0);
        request.write_custom_header(header);
        request
    }

    fn header<H: CustomHeader>(
        addr: &str,
        what: &'static str,
        response: &RemotingCommand,
    ) -> Result<H, ControllerError> {
        response
            .decode_custom_header()
            .map_err(|e| ControllerError::Unreachable {
                addr: addr.to_owned(),
                what,
                why: format!("a malformed answer: {e}"),
            })
    }

    fn body<T: serde::de::DeserializeOwned + Default>(
        addr: &str,
        what: &'static str,
        response: &RemotingCommand,
    ) -> Result<T, ControllerError> {
        if response.body.is_empty() {
            return Ok(T::default());
        }
        parse_lenient(&response.body, what).map_err(|e| ControllerError::Unreachable {
            addr: addr.to_owned(),
            what,
            why: format!("a malformed answer: {e}"),
        })
    }

    /// `getControllerMetaData`: asks `addr` who leads the controllers.
    pub(crate) fn metadata(
        &self,
        addr: &str,
    ) -> Result<GetMetaDataResponseHeader, ControllerError> {
        let what = "CONTROLLER_GET_METADATA_INFO";
        let request = RemotingCommand::request(request_code::CONTROLLER_GET_METADATA_INFO, 0);
        let response = self.invoke(addr, what, request, &[])?;
        Self::header(addr, what, &response)
    }

    /// `updateControllerMetadata`: the leader's address, from the first node that names one.
    pub fn find_leader(&self) -> Result<String, ControllerError> {
        each_node(&self.addrs, |addr| self.metadata(addr).ok())
            .into_iter()
            .flatten()
            .find_map(|m| m.controller_leader_address.filter(|a| !a.is_empty()))
            .ok_or_else(|| ControllerError::NoLeader {
                addrs: self.addrs.join(";"),
            })
    }

    /// The nodes that answer at all (`scanAvailableControllerAddresses`).
    pub fn available(&self) -> Vec<String> {
        let answers = each_node(&self.addrs, |addr| self.metadata(addr).is_ok());
        let nodes = self.addrs.iter().zip(answers);
        nodes
            .filter(|(_, ok)| *ok)
            .map(|(a, _)| a.clone())
            .collect()
    }

    pub fn next_broker_id(
        &self,
        leader: &str,
        me: &BrokerIdentity,
    ) -> Result<i64, ControllerError> {
        let what = "CONTROLLER_GET_NEXT_BROKER_ID";
        let header = GetNextBrokerIdRequestHeader {
            cluster_name: me.cluster_name.clone(),
            broker_name: me.broker_name.clone(),
        };
        let request = Self::request(request_code::CONTROLLER_GET_NEXT_BROKER_ID, &header);
        let response = self.invoke(leader, what, request, &[])?;
        let answer: GetNextBrokerIdResponseHeader = Self::header(leader, what, &response)?;
        answer
            .next_broker_id
            .ok_or_else(|| ControllerError::Unreachable {
                addr: leader.to_owned(),
                what,
                why: "the answer names no nextBrokerId".into(),
            })
    }

    /// Claims `broker_id`; refused when another broker holds it with another check code.
    pub fn apply_broker_id(
        &self,
        leader: &str,
        me: &BrokerIdentity,
        broker_id: i64,
        check_code: &str,
    ) -> Result<(), ControllerError> {
        let header = ApplyBrokerIdRequestHeader {
            cluster_name: me.cluster_name.clone(),
            broker_name: me.broker_name.clone(),
            applied_broker_id: broker_id,
            register_check_code: check_code.to_owned(),
        };
        let request = Self::request(request_code::CONTROLLER_APPLY_BROKER_ID, &header);
        self.invoke(leader, "CONTROLLER_APPLY_BROKER_ID", request, &[])?;
        Ok(())
    }

    /// `registerBrokerToController`: this broker is alive at its address; the answer names the
    /// group's master, if it has one.
    pub fn register(
        &self,
        leader: &str,
        me: &BrokerIdentity,
        broker_id: i64,
    ) -> Result<MasterInfo, ControllerError> {
        let what = "CONTROLLER_REGISTER_BROKER";
        let header = RegisterBrokerToControllerRequestHeader {
            cluster_name: me.cluster_name.clone(),
            broker_name: me.broker_name.clone(),
            broker_id,
            broker_address: me.broker_addr.clone(),
            invoke_time: now_millis(),
        };
        let request = Self::request(request_code::CONTROLLER_REGISTER_BROKER, &header);
        let response = self.invoke(leader, what, request, &[])?;
        let set: SyncStateSet = Self::body(leader, what, &response)?;
        Ok(MasterInfo::new(Self::header(leader, what, &response)?, set))
    }

    /// `getReplicaInfo`: the group's master, epochs and SyncStateSet.
    pub fn replica_info(
        &self,
        leader: &str,
        broker_name: &str,
    ) -> Result<MasterInfo, ControllerError> {
        let what = "CONTROLLER_GET_REPLICA_INFO";
        let header = GetReplicaInfoRequestHeader {
            broker_name: broker_name.to_owned(),
        };
        let request = Self::request(request_code::CONTROLLER_GET_REPLICA_INFO, &header);
        let response = self.invoke(leader, what, request, &[])?;
        let set: SyncStateSet = Self::body(leader, what, &response)?;
        Ok(MasterInfo::new(Self::header(leader, what, &response)?, set))
    }

    /// `brokerElect`: asks the controller to elect a master (this broker, if it may be one).
    /// A group that has a live master answers with it (CONTROLLER_MASTER_STILL_EXIST).
    pub fn elect(
        &self,
        leader: &str,
        me: &BrokerIdentity,
        broker_id: i64,
    ) -> Result<MasterInfo, ControllerError> {
        let what = "CONTROLLER_ELECT_MASTER";
        let header = ElectMasterRequestHeader {
            cluster_name: me.cluster_name.clone(),
            broker_name: me.broker_name.clone(),
            broker_id,
            designate_elect: false,
            invoke_time: Some(now_millis()),
        };
        let request = Self::request(request_code::CONTROLLER_ELECT_MASTER, &header);
        let still = [response_code::CONTROLLER_MASTER_STILL_EXIST];
        let response = self.invoke(leader, what, request, &still)?;
        let body: ElectMasterResponseBody = Self::body(leader, what, &response)?;
        let set = SyncStateSet {
            sync_state_set: body.sync_state_set,
            sync_state_set_epoch: 0,
        };
        Ok(MasterInfo::new(Self::header(leader, what, &response)?, set))
    }

    /// `alterSyncStateSet`: the master proposes `set` in place of the version of
    /// `set.sync_state_set_epoch`; the answer is the set with its new epoch.
    pub fn alter_sync_state_set(
        &self,
        leader: &str,
        broker_name: &str,
        master_broker_id: i64,
        master_epoch: i32,
        set: &SyncStateSet,
    ) -> Result<SyncStateSet, ControllerError> {
        let what = "CONTROLLER_ALTER_SYNC_STATE_SET";
        let header = AlterSyncStateSetRequestHeader {
            broker_name: broker_name.to_owned(),
            master_broker_id,
            master_epoch,
            invoke_time: now_millis(),
        };
        let mut request = Self::request(request_code::CONTROLLER_ALTER_SYNC_STATE_SET, &header);
        request.body = to_json(set, JsonStyle::Fastjson).into_bytes();
        let response = self.invoke(leader, what, request, &[])?;
        Self::body(leader, what, &response)
    }

    /// `sendHeartbeatToController`, oneway to each of `addrs`.
    pub fn heartbeat(&self, addrs: &[String], me: &BrokerIdentity, state: HeartbeatState) {
        let header = BrokerHeartbeatRequestHeader {
            cluster_name: me.cluster_name.clone(),
            broker_addr: me.broker_addr.clone(),
            broker_name: me.broker_name.clone(),
            broker_id: state.broker_id,
            epoch: Some(state.epoch),
            max_offset: Some(i64::try_from(state.max_offset).unwrap_or(i64::MAX)),
            confirm_offset: Some(i64::try_from(state.confirm_offset).unwrap_or(i64::MAX)),
            heartbeat_timeout_mills: Some(state.heartbeat_timeout.as_millis() as i64),
            election_priority: Some(state.election_priority),
        };
        each_node(addrs, |addr| {
            let request = Self::request(request_code::BROKER_HEARTBEAT, &header);
            // Oneway, as RocketMQ's: a node that is down misses this one and gets the next.
            let _ = self.client.invoke_oneway(addr, request, CONTROLLER_TIMEOUT);
        });
    }

    pub fn shutdown(&self) {
        self.client.shutdown();
    }
}
