//! The headers a broker in controller mode exchanges with RocketMQ 5's controller
//! (`org.apache.rocketmq.remoting.protocol.header.controller` and the heartbeat's
//! `BrokerHeartbeatRequestHeader`): broker-id assignment, registration, heartbeats, replica
//! info, elections and SyncStateSet changes.

custom_header! {
    /// `GetMetaDataResponseHeader` (CONTROLLER_GET_METADATA_INFO): who leads the controllers.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub(crate) struct GetMetaDataResponseHeader("CONTROLLER_GET_METADATA_INFO response") {
        pub group: Option<String> = "group",
        pub controller_leader_id: Option<String> = "controllerLeaderId",
        pub controller_leader_address: Option<String> = "controllerLeaderAddress",
        pub is_leader: bool = "isLeader" or false,
        pub peers: Option<String> = "peers",
    }
}

custom_header! {
    /// `GetNextBrokerIdRequestHeader` (CONTROLLER_GET_NEXT_BROKER_ID).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetNextBrokerIdRequestHeader("CONTROLLER_GET_NEXT_BROKER_ID") {
        pub cluster_name: String = "clusterName",
        pub broker_name: String = "brokerName",
    }
}

custom_header! {
    /// `GetNextBrokerIdResponseHeader`: the id the controller would give the next member.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetNextBrokerIdResponseHeader("CONTROLLER_GET_NEXT_BROKER_ID response") {
        pub cluster_name: Option<String> = "clusterName",
        pub broker_name: Option<String> = "brokerName",
        pub next_broker_id: Option<i64> = "nextBrokerId",
    }
}

custom_header! {
    /// `ApplyBrokerIdRequestHeader` (CONTROLLER_APPLY_BROKER_ID): claims an id, with the check
    /// code (`address;millis`) that lets the same broker claim it again after a crash.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct ApplyBrokerIdRequestHeader("CONTROLLER_APPLY_BROKER_ID") {
        pub cluster_name: String = "clusterName",
        pub broker_name: String = "brokerName",
        pub applied_broker_id: i64 = "appliedBrokerId",
        pub register_check_code: String = "registerCheckCode",
    }
}

custom_header! {
    /// `RegisterBrokerToControllerRequestHeader` (CONTROLLER_REGISTER_BROKER).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct RegisterBrokerToControllerRequestHeader("CONTROLLER_REGISTER_BROKER") {
        pub cluster_name: String = "clusterName",
        pub broker_name: String = "brokerName",
        pub broker_id: i64 = "brokerId",
        pub broker_address: String = "brokerAddress",
        pub invoke_time: i64 = "invokeTime" or 0,
    }
}

custom_header! {
    /// The master the controller knows of, with the epochs: the answer to
    /// CONTROLLER_REGISTER_BROKER, CONTROLLER_GET_REPLICA_INFO and CONTROLLER_ELECT_MASTER
    /// (`RegisterBrokerToControllerResponseHeader`, `GetReplicaInfoResponseHeader`,
    /// `ElectMasterResponseHeader`: the same fields, the first and last with the SyncStateSet
    /// epoch). The controller's NOTIFY_BROKER_ROLE_CHANGED request carries the same four
    /// (`NotifyBrokerRoleChangedRequestHeader`).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub(crate) struct MasterInfoResponseHeader("controller response") {
        pub master_broker_id: Option<i64> = "masterBrokerId",
        pub master_address: Option<String> = "masterAddress",
        pub master_epoch: Option<i32> = "masterEpoch",
        pub sync_state_set_epoch: Option<i32> = "syncStateSetEpoch",
    }
}

custom_header! {
    /// `GetReplicaInfoRequestHeader` (CONTROLLER_GET_REPLICA_INFO).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetReplicaInfoRequestHeader("CONTROLLER_GET_REPLICA_INFO") {
        pub broker_name: String = "brokerName",
    }
}

custom_header! {
    /// `ElectMasterRequestHeader` (CONTROLLER_ELECT_MASTER), as a broker sends it for itself
    /// (`ofBrokerTrigger`: not designated).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct ElectMasterRequestHeader("CONTROLLER_ELECT_MASTER") {
        pub cluster_name: String = "clusterName",
        pub broker_name: String = "brokerName",
        pub broker_id: i64 = "brokerId",
        pub designate_elect: bool = "designateElect",
        pub invoke_time: Option<i64> = "invokeTime",
    }
}

custom_header! {
    /// `AlterSyncStateSetRequestHeader` (CONTROLLER_ALTER_SYNC_STATE_SET); the body is the
    /// proposed SyncStateSet with the epoch it replaces.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct AlterSyncStateSetRequestHeader("CONTROLLER_ALTER_SYNC_STATE_SET") {
        pub broker_name: String = "brokerName",
        pub master_broker_id: i64 = "masterBrokerId",
        pub master_epoch: i32 = "masterEpoch",
        pub invoke_time: i64 = "invokeTime" or 0,
    }
}

custom_header! {
    /// `BrokerHeartbeatRequestHeader` (BROKER_HEARTBEAT, oneway): alive, with what the
    /// controller's election weighs (epoch, max and confirm offsets, priority).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct BrokerHeartbeatRequestHeader("BROKER_HEARTBEAT") {
        pub cluster_name: String = "clusterName",
        pub broker_addr: String = "brokerAddr",
        pub broker_name: String = "brokerName",
        pub broker_id: Option<i64> = "brokerId",
        pub epoch: Option<i32> = "epoch",
        pub max_offset: Option<i64> = "maxOffset",
        pub confirm_offset: Option<i64> = "confirmOffset",
        pub heartbeat_timeout_mills: Option<i64> = "heartbeatTimeoutMills",
        pub election_priority: Option<i32> = "electionPriority",
    }
}
