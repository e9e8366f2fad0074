//! RocketMQ's `RouteInfoManager`: which brokers exist, which topics they serve, and which are
//! alive. Brokers register every 30 s; one not heard from within its heartbeat timeout (120 s
//! by default) is dropped by [`RouteInfoManager::scan_not_active_broker`].
//!
//! The tables are RocketMQ's: `clusterAddrTable` (cluster -> broker names), `brokerAddrTable`
//! (broker name -> `BrokerData`: broker id -> address), `topicQueueTable` (topic -> broker name
//! -> `QueueData`), `brokerLiveTable` (cluster + address -> last update, timeout, data version,
//! HA address) and `filterServerTable`.
//!
//! Unlike Java's, this type holds no lock: every mutation takes `&mut self`, so the server that
//! owns it decides how requests share it. Time comes in as `now_ms` arguments, so the expiry
//! logic is tested without sleeping. Static topics (topic queue mappings), `notifyMinBrokerId`
//! and `deleteTopicWithBrokerRegistration` are not carried over: rocketha's brokers use none.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::registered_topics::{RegisteredTopics, TopicRoute};
use crate::protocol::body::{
    perm, BrokerData, ClusterInfo, DataVersion, QueueData, TopicRouteData, MASTER_ID,
};
use crate::remoting::header::{RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader};

/// `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`.
pub(crate) const DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS: i64 = 120_000;

/// `BrokerAddrInfo`: a broker instance is its address within a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BrokerAddrInfo {
    pub(crate) cluster_name: String,
    pub(crate) broker_addr: String,
}

impl BrokerAddrInfo {
    fn new(cluster_name: &str, broker_addr: &str) -> Self {
        BrokerAddrInfo {
            cluster_name: cluster_name.to_string(),
            broker_addr: broker_addr.to_string(),
        }
    }
}

/// `BrokerLiveInfo`, without the Netty channel: the server maps connections to addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokerLiveInfo {
    pub(crate) last_update_timestamp: i64,
    pub(crate) heartbeat_timeout_millis: i64,
    pub(crate) data_version: DataVersion,
    pub(crate) ha_server_addr: String,
}

/// `RegisterBrokerResult`: for a slave, its master's HA and broker addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RegisterBrokerResult {
    pub(crate) ha_server_addr: Option<String>,
    pub(crate) master_addr: Option<String>,
}

/// What `registerBroker` made of the broker's `brokerAddrTable` entry.
enum AddrUpdate {
    Registered(Registration),
    /// Another instance with a newer state holds the broker id: RocketMQ's empty result.
    Stale,
    /// A single topic from a broker not yet known: RocketMQ's null result.
    Refused,
}

/// The broker's role as `registerBroker` found it, for the topic and answer steps.
struct Registration {
    /// First registration of this broker (or of this id): publish every topic.
    register_first: bool,
    is_master: bool,
    /// The slave with the lowest id, which acts as master when enabled.
    is_prime_slave: bool,
    acting_master: bool,
}

#[derive(Debug, Default)]
pub(crate) struct RouteInfoManager {
    /// By topic (hashed: a registration looks up each of its topics, a route lookup one),
    /// then by broker name.
    topic_queue_table: HashMap<String, BTreeMap<String, QueueData>>,
    broker_addr_table: BTreeMap<String, BrokerData>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    filter_server_table: HashMap<BrokerAddrInfo, Vec<String>>,
    /// `NamesrvConfig.supportActingMaster` (off by default, as in RocketMQ).
    support_acting_master: bool,
}

impl RouteInfoManager {
    pub(crate) fn new(support_acting_master: bool) -> Self {
        RouteInfoManager {
            support_acting_master,
            ..RouteInfoManager::default()
        }
    }

    /// `registerBroker`. `None` is RocketMQ's null result ("register broker failed"): a single
    /// topic registered by a broker the table does not know yet. A registration refused for
    /// an older data version answers an empty result, as Java does.
    pub(crate) fn register_broker(
        &mut self,
        req: &RegisterBrokerRequestHeader,
        topic_config_wrapper: Option<&RegisteredTopics>,
        filter_server_list: Option<&[String]>,
        now_ms: i64,
    ) -> Option<RegisterBrokerResult> {
        let (cluster, name) = (req.cluster_name.as_str(), req.broker_name.as_str());
        self.cluster_addr_table
            .entry(cluster.to_string())
            .or_default()
            .insert(name.to_string());

        let registration = match self.update_broker_addr_table(req, topic_config_wrapper) {
            AddrUpdate::Registered(registration) => registration,
            AddrUpdate::Stale => return Some(RegisterBrokerResult::default()),
            AddrUpdate::Refused => return None,
        };
        if let Some(wrapper) = topic_config_wrapper {
            if registration.is_master || registration.is_prime_slave {
                self.update_topic_configs(req, wrapper, &registration);
            }
        }
        self.update_broker_live_info(req, topic_config_wrapper, filter_server_list, now_ms);
        Some(self.master_of(cluster, name, registration.is_master))
    }

    /// `registerBroker`'s `brokerAddrTable` part: records the broker's id and address, unless
    /// another instance with a newer state holds the id ([`AddrUpdate::Stale`]) or the broker
    /// registers a single topic before it is known ([`AddrUpdate::Refused`]).
    fn update_broker_addr_table(
        &mut self,
        req: &RegisterBrokerRequestHeader,
        topic_config_wrapper: Option<&RegisteredTopics>,
    ) -> AddrUpdate {
        let (cluster, addr, name, id) = (
            req.cluster_name.as_str(),
            req.broker_addr.as_str(),
            req.broker_name.as_str(),
            req.broker_id,
        );
        let mut register_first = !self.broker_addr_table.contains_key(name);
        let broker_data = self
            .broker_addr_table
            .entry(name.to_string())
            .or_insert_with(|| BrokerData {
                cluster: cluster.to_string(),
                broker_name: name.to_string(),
                ..BrokerData::default()
            });
        let is_old_version_broker = req.enable_acting_master.is_none();
        broker_data.enable_acting_master = req.enable_acting_master.unwrap_or(false);
        broker_data.zone_name = req.zone_name.clone();

        // Switching slave to master: the same address must have only one id.
        broker_data
            .broker_addrs
            .retain(|&other_id, other_addr| !(other_addr == addr && other_id != id));

        let new_state_version = topic_config_wrapper.map_or(0, |w| w.data_version.state_version);
        if let Some(old_addr) = broker_data.broker_addrs.get(&id) {
            if old_addr != addr {
                let old = self
                    .broker_live_table
                    .get(&BrokerAddrInfo::new(cluster, old_addr));
                if old.is_some_and(|o| o.data_version.state_version > new_state_version) {
                    // Another instance with a newer state holds this id: ignore this one.
                    self.broker_live_table
                        .remove(&BrokerAddrInfo::new(cluster, addr));
                    return AddrUpdate::Stale;
                }
            }
        }

        let topic_count = topic_config_wrapper.map_or(0, |w| w.topics.len());
        if !broker_data.broker_addrs.contains_key(&id) && topic_count == 1 {
            log::warn!(
                "cannot register a single topic for broker {name}[{id}]={addr}: it has not registered"
            );
            return AddrUpdate::Refused;
        }

        let old_addr = broker_data.broker_addrs.insert(id, addr.to_string());
        register_first = register_first || old_addr.as_deref().is_none_or(str::is_empty);

        let is_master = id == MASTER_ID;
        AddrUpdate::Registered(Registration {
            register_first,
            is_master,
            is_prime_slave: !is_old_version_broker
                && !is_master
                && broker_data.broker_addrs.keys().next() == Some(&id),
            acting_master: broker_data.enable_acting_master,
        })
    }

    /// `registerBroker`'s topic part: the master (or the prime slave acting for it) publishes
    /// the topics that are new or whose data version changed.
    fn update_topic_configs(
        &mut self,
        req: &RegisterBrokerRequestHeader,
        wrapper: &RegisteredTopics,
        registration: &Registration,
    ) {
        let (cluster, addr, name) = (
            req.cluster_name.as_str(),
            req.broker_addr.as_str(),
            req.broker_name.as_str(),
        );
        // Once per registration, not per topic: the period's registration of an unchanged
        // table then costs a lookup per topic.
        let broker_changed = registration.register_first
            || self.is_broker_topic_config_changed(cluster, addr, &wrapper.data_version);
        for config in &wrapper.topics {
            let known = self
                .topic_queue_table
                .get(&config.topic_name)
                .is_some_and(|queues| queues.contains_key(name));
            if broker_changed || !known {
                let mut perm = config.perm;
                if registration.is_prime_slave && registration.acting_master {
                    // The acting master serves reads only.
                    perm &= !perm::PERM_WRITE;
                }
                self.create_and_update_queue_data(name, config, perm);
            }
        }
    }

    /// `registerBroker`'s `brokerLiveTable` and `filterServerTable` part.
    fn update_broker_live_info(
        &mut self,
        req: &RegisterBrokerRequestHeader,
        topic_config_wrapper: Option<&RegisteredTopics>,
        filter_server_list: Option<&[String]>,
        now_ms: i64,
    ) {
        let addr_info = BrokerAddrInfo::new(&req.cluster_name, &req.broker_addr);
        self.broker_live_table.insert(
            addr_info.clone(),
            BrokerLiveInfo {
                last_update_timestamp: now_ms,
                heartbeat_timeout_millis: req
                    .heartbeat_timeout_millis
                    .unwrap_or(DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS),
                data_version: topic_config_wrapper.map_or_else(
                    || DataVersion {
                        timestamp: now_ms,
                        ..DataVersion::default()
                    },
                    |w| w.data_version.clone(),
                ),
                ha_server_addr: req.ha_server_addr.clone(),
            },
        );
        if let Some(list) = filter_server_list {
            if list.is_empty() {
                self.filter_server_table.remove(&addr_info);
            } else {
                self.filter_server_table.insert(addr_info, list.to_vec());
            }
        }
    }

    /// `registerBroker`'s answer: a slave learns where to replicate from (seed 004: no
    /// haMasterAddress configured); a master gets an empty result.
    fn master_of(&self, cluster: &str, name: &str, is_master: bool) -> RegisterBrokerResult {
        let mut result = RegisterBrokerResult::default();
        if is_master {
            return result;
        }
        let master_addr = self
            .broker_addr_table
            .get(name)
            .and_then(|b| b.broker_addrs.get(&MASTER_ID));
        if let Some(master_addr) = master_addr {
            if let Some(master) = self
                .broker_live_table
                .get(&BrokerAddrInfo::new(cluster, master_addr))
            {
                result.ha_server_addr = Some(master.ha_server_addr.clone());
                result.master_addr = Some(master_addr.clone());
            }
        }
        result
    }

    /// The broker's queues of the topic, as `config` says with `perm`; updated in place when
    /// the broker has them already.
    fn create_and_update_queue_data(&mut self, broker_name: &str, config: &TopicRoute, perm: i32) {
        if !self.topic_queue_table.contains_key(&config.topic_name) {
            let topic = config.topic_name.clone();
            self.topic_queue_table.insert(topic, BTreeMap::new());
        }
        let Some(queues) = self.topic_queue_table.get_mut(&config.topic_name) else {
            return;
        };
        if !queues.contains_key(broker_name) {
            let queue_data = QueueData {
                broker_name: broker_name.to_owned(),
                ..QueueData::default()
            };
            queues.insert(broker_name.to_owned(), queue_data);
        }
        let Some(queue_data) = queues.get_mut(broker_name) else {
            return;
        };
        queue_data.read_queue_nums = config.read_queue_nums;
        queue_data.write_queue_nums = config.write_queue_nums;
        queue_data.perm = perm;
        queue_data.topic_sys_flag = config.topic_sys_flag;
    }

    /// `queryBrokerTopicConfig`: the data version a broker last registered.
    pub(crate) fn query_broker_topic_config(
        &self,
        cluster_name: &str,
        broker_addr: &str,
    ) -> Option<&DataVersion> {
        self.broker_live_table
            .get(&BrokerAddrInfo::new(cluster_name, broker_addr))
            .map(|live| &live.data_version)
    }

    /// `isBrokerTopicConfigChanged`: QUERY_DATA_VERSION's answer.
    pub(crate) fn is_broker_topic_config_changed(
        &self,
        cluster_name: &str,
        broker_addr: &str,
        data_version: &DataVersion,
    ) -> bool {
        self.query_broker_topic_config(cluster_name, broker_addr) != Some(data_version)
    }

    /// `updateBrokerInfoUpdateTimestamp`: a QUERY_DATA_VERSION counts as a heartbeat.
    pub(crate) fn update_broker_info_update_timestamp(
        &mut self,
        cluster_name: &str,
        broker_addr: &str,
        now_ms: i64,
    ) {
        if let Some(live) = self
            .broker_live_table
            .get_mut(&BrokerAddrInfo::new(cluster_name, broker_addr))
        {
            live.last_update_timestamp = now_ms;
        }
    }

    /// `unRegisterBroker` for a batch of requests.
    pub(crate) fn unregister_broker(&mut self, requests: &[UnRegisterBrokerRequestHeader]) {
        let mut removed_broker = BTreeSet::new();
        let mut reduced_broker = BTreeSet::new();
        for req in requests {
            let addr_info = BrokerAddrInfo::new(&req.cluster_name, &req.broker_addr);
            self.broker_live_table.remove(&addr_info);
            self.filter_server_table.remove(&addr_info);
            let mut remove_broker_name = false;
            if let Some(broker_data) = self.broker_addr_table.get_mut(&req.broker_name) {
                broker_data
                    .broker_addrs
                    .retain(|_, addr| *addr != req.broker_addr);
                if broker_data.broker_addrs.is_empty() {
                    self.broker_addr_table.remove(&req.broker_name);
                    remove_broker_name = true;
                }
            }
            if remove_broker_name {
                if let Some(names) = self.cluster_addr_table.get_mut(&req.cluster_name) {
                    names.remove(&req.broker_name);
                    if names.is_empty() {
                        self.cluster_addr_table.remove(&req.cluster_name);
                    }
                }
                removed_broker.insert(req.broker_name.clone());
            } else {
                reduced_broker.insert(req.broker_name.clone());
            }
        }
        self.clean_topic_by_unregister_requests(&removed_broker, &reduced_broker);
    }

    fn clean_topic_by_unregister_requests(
        &mut self,
        removed_broker: &BTreeSet<String>,
        reduced_broker: &BTreeSet<String>,
    ) {
        let no_master: BTreeSet<&String> = reduced_broker
            .iter()
            .filter(|name| {
                self.broker_addr_table
                    .get(*name)
                    .is_some_and(|b| b.enable_acting_master)
                    && self.is_no_master_exists(name)
            })
            .collect();
        self.topic_queue_table.retain(|_, queues| {
            queues.retain(|broker_name, _| !removed_broker.contains(broker_name));
            for (broker_name, queue_data) in queues.iter_mut() {
                if no_master.contains(broker_name) {
                    // Master gone, acting master in charge: no more writes to its queues.
                    queue_data.perm &= !perm::PERM_WRITE;
                }
            }
            !queues.is_empty()
        });
    }

    fn is_no_master_exists(&self, broker_name: &str) -> bool {
        self.broker_addr_table
            .get(broker_name)
            .and_then(|b| b.broker_addrs.keys().next())
            .is_none_or(|&min_id| min_id > MASTER_ID)
    }

    /// `scanNotActiveBroker`: drops every broker whose last register or heartbeat is older
    /// than its timeout at `now_ms`, and returns them so the server can close their
    /// connections.
    pub(crate) fn scan_not_active_broker(&mut self, now_ms: i64) -> Vec<BrokerAddrInfo> {
        let mut expired: Vec<BrokerAddrInfo> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| {
                live.last_update_timestamp
                    .saturating_add(live.heartbeat_timeout_millis)
                    < now_ms
            })
            .map(|(info, _)| info.clone())
            .collect();
        expired.sort();
        for info in &expired {
            self.on_channel_destroy(info);
        }
        expired
    }

    /// When [`RouteInfoManager::scan_not_active_broker`] will next find a broker to drop, if
    /// none registers or heartbeats before: the name server sleeps until then instead of
    /// scanning every 5 s as RocketMQ does.
    pub(crate) fn next_expiry_ms(&self) -> Option<i64> {
        self.broker_live_table
            .values()
            .map(|live| {
                live.last_update_timestamp
                    .saturating_add(live.heartbeat_timeout_millis)
                    .saturating_add(1)
            })
            .min()
    }

    /// `onChannelDestroy`: unregisters the broker at this address, found by cluster and
    /// address in `brokerAddrTable` (`setupUnRegisterRequest`).
    pub(crate) fn on_channel_destroy(&mut self, info: &BrokerAddrInfo) {
        let found = self.broker_addr_table.values().find_map(|b| {
            if b.cluster != info.cluster_name {
                return None;
            }
            b.broker_addrs
                .iter()
                .find(|(_, addr)| **addr == info.broker_addr)
                .map(|(&id, _)| (b.broker_name.clone(), id))
        });
        match found {
            Some((broker_name, broker_id)) => {
                self.unregister_broker(&[UnRegisterBrokerRequestHeader {
                    broker_name,
                    broker_addr: info.broker_addr.clone(),
                    cluster_name: info.cluster_name.clone(),
                    broker_id,
                }])
            }
            // Java leaves such a live entry behind, to be found again at every scan; it
            // describes no broker, so dropping it loses nothing.
            None => {
                self.broker_live_table.remove(info);
                self.filter_server_table.remove(info);
            }
        }
    }

    /// `pickupTopicRouteData`: `None` when no live broker serves the topic.
    pub(crate) fn pickup_topic_route_data(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: queues.values().cloned().collect(),
            ..TopicRouteData::default()
        };
        for broker_name in queues.keys() {
            let Some(broker_data) = self.broker_addr_table.get(broker_name) else {
                continue;
            };
            if !self.filter_server_table.is_empty() {
                for addr in broker_data.broker_addrs.values() {
                    let info = BrokerAddrInfo::new(&broker_data.cluster, addr);
                    if let Some(list) = self.filter_server_table.get(&info) {
                        route.filter_server_table.insert(addr.clone(), list.clone());
                    }
                }
            }
            route.broker_datas.push(broker_data.clone());
        }
        if route.broker_datas.is_empty() {
            return None;
        }
        if self.support_acting_master {
            Self::apply_acting_master(&mut route);
        }
        Some(route)
    }

    /// With `supportActingMaster`, a master-less group whose queues lost write permission
    /// presents its smallest-id slave under id 0, so clients read from it as the master.
    fn apply_acting_master(route: &mut TopicRouteData) {
        let queue_perm: BTreeMap<&str, i32> = route
            .queue_datas
            .iter()
            .map(|q| (q.broker_name.as_str(), q.perm))
            .collect();
        for broker_data in &mut route.broker_datas {
            let addrs = &mut broker_data.broker_addrs;
            if addrs.is_empty()
                || addrs.contains_key(&MASTER_ID)
                || !broker_data.enable_acting_master
            {
                continue;
            }
            let writeable = queue_perm
                .get(broker_data.broker_name.as_str())
                .is_none_or(|p| p & perm::PERM_WRITE != 0);
            if !writeable {
                if let Some((_, addr)) = addrs.pop_first() {
                    addrs.insert(MASTER_ID, addr);
                }
            }
        }
    }

    /// `getAllTopicList`: GET_ALL_TOPIC_LIST_FROM_NAMESERVER's answer (a `TopicList` body),
    /// every topic some live broker registered, system and retry topics included.
    pub(crate) fn get_all_topic_list(&self) -> Vec<u8> {
        let mut topics: Vec<&String> = self.topic_queue_table.keys().collect();
        topics.sort_unstable();
        serde_json::json!({ "topicList": topics })
            .to_string()
            .into_bytes()
    }

    /// `wipeWritePermOfBroker` (`wipe`) and `addWritePermOfBroker`: every topic's queues on
    /// `broker_name` lose the write permission, so producers route around the broker while
    /// consumers drain it, or get read and write back. The number of topics changed.
    pub(crate) fn operate_write_perm_of_broker(&mut self, broker_name: &str, wipe: bool) -> i32 {
        let mut count = 0;
        for queue in self
            .topic_queue_table
            .values_mut()
            .filter_map(|q| q.get_mut(broker_name))
        {
            queue.perm = if wipe {
                queue.perm & !perm::PERM_WRITE
            } else {
                perm::PERM_READ | perm::PERM_WRITE
            };
            count += 1;
        }
        count
    }

    /// `deleteTopic`: the topic's queues on the brokers of `cluster` (every broker when
    /// `None`) leave the routes; a topic left with none is gone.
    pub(crate) fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        let Some(queues) = self.topic_queue_table.get_mut(topic) else {
            return;
        };
        match cluster.filter(|c| !c.is_empty()) {
            Some(cluster) => {
                let brokers = self.cluster_addr_table.get(cluster);
                queues.retain(|broker, _| !brokers.is_some_and(|b| b.contains(broker)));
            }
            None => queues.clear(),
        }
        if queues.is_empty() {
            self.topic_queue_table.remove(topic);
        }
    }

    /// `getAllClusterInfo`: GET_BROKER_CLUSTER_INFO's answer.
    pub(crate) fn get_all_cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    pub(crate) fn broker_live_info(
        &self,
        cluster_name: &str,
        broker_addr: &str,
    ) -> Option<&BrokerLiveInfo> {
        self.broker_live_table
            .get(&BrokerAddrInfo::new(cluster_name, broker_addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::body::mq_version;

    const T0: i64 = 1_700_000_000_000;

    fn header(name: &str, id: i64, addr: &str, ha: &str) -> RegisterBrokerRequestHeader {
        RegisterBrokerRequestHeader {
            broker_name: name.into(),
            broker_addr: addr.into(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: ha.into(),
            broker_id: id,
            heartbeat_timeout_millis: None,
            enable_acting_master: Some(false),
            compressed: false,
            body_crc32: 0,
            zone_name: None,
        }
    }

    fn topics(names: &[&str], counter: i64) -> RegisteredTopics {
        RegisteredTopics {
            topics: names
                .iter()
                .map(|n| TopicRoute {
                    topic_name: n.to_string(),
                    read_queue_nums: 4,
                    write_queue_nums: 4,
                    perm: perm::PERM_READ | perm::PERM_WRITE,
                    topic_sys_flag: 0,
                })
                .collect(),
            data_version: DataVersion {
                state_version: 0,
                timestamp: T0,
                counter,
            },
        }
    }

    const MASTER: &str = "10.0.0.1:10911";
    const MASTER_HA: &str = "10.0.0.1:10912";
    const SLAVE: &str = "10.0.0.2:10911";
    const SLAVE_HA: &str = "10.0.0.2:10912";

    /// A master and its slave, both registered with two topics.
    fn master_and_slave() -> RouteInfoManager {
        let mut rim = RouteInfoManager::new(false);
        let t = topics(&["TopicA", "TopicB"], 1);
        let master = header("broker-a", 0, MASTER, MASTER_HA);
        let r = rim.register_broker(&master, Some(&t), Some(&[]), T0);
        assert_eq!(
            r,
            Some(RegisterBrokerResult::default()),
            "a master learns nothing"
        );
        let slave = header("broker-a", 1, SLAVE, SLAVE_HA);
        let r = rim.register_broker(&slave, Some(&t), Some(&[]), T0);
        assert_eq!(
            r,
            Some(RegisterBrokerResult {
                ha_server_addr: Some(MASTER_HA.into()),
                master_addr: Some(MASTER.into()),
            })
        );
        rim
    }

    #[test]
    fn register_master_and_slave() {
        let rim = master_and_slave();
        let route = rim.pickup_topic_route_data("TopicA").unwrap();
        assert_eq!(route.queue_datas.len(), 1);
        assert_eq!(route.queue_datas[0].broker_name, "broker-a");
        assert_eq!(route.queue_datas[0].write_queue_nums, 4);
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, MASTER.to_string()), (1, SLAVE.to_string())])
        );
        assert_eq!(rim.pickup_topic_route_data("NoSuchTopic"), None);
        let info = rim.get_all_cluster_info();
        assert_eq!(
            String::from_utf8(info.encode()).unwrap(),
            concat!(
                r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911","#,
                r#"1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","#,
                r#""enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
            )
        );
        assert_eq!(ClusterInfo::decode(&info.encode()), Ok(info));
        let live = rim.broker_live_info("DefaultCluster", SLAVE).unwrap();
        assert_eq!(live.heartbeat_timeout_millis, 120_000);
        assert_eq!(live.ha_server_addr, SLAVE_HA);
    }

    #[test]
    fn slave_before_its_master_learns_nothing_until_the_master_registers() {
        let mut rim = RouteInfoManager::new(false);
        let t = topics(&["TopicA", "TopicB"], 1);
        let slave = header("broker-a", 1, SLAVE, SLAVE_HA);
        assert_eq!(
            rim.register_broker(&slave, Some(&t), None, T0),
            Some(RegisterBrokerResult::default())
        );
        rim.register_broker(
            &header("broker-a", 0, MASTER, MASTER_HA),
            Some(&t),
            None,
            T0,
        );
        let r = rim
            .register_broker(&slave, Some(&t), None, T0 + 30_000)
            .unwrap();
        assert_eq!(r.ha_server_addr.as_deref(), Some(MASTER_HA));
        assert_eq!(r.master_addr.as_deref(), Some(MASTER));
    }

    #[test]
    fn a_slave_does_not_register_topics_while_its_master_is_there() {
        let mut rim = RouteInfoManager::new(false);
        rim.register_broker(
            &header("broker-a", 0, MASTER, MASTER_HA),
            Some(&topics(&["A", "B"], 1)),
            None,
            T0,
        );
        let slave_topics = topics(&["A", "B", "OnlySlave"], 1);
        rim.register_broker(
            &header("broker-a", 1, SLAVE, SLAVE_HA),
            Some(&slave_topics),
            None,
            T0,
        );
        assert!(rim.pickup_topic_route_data("OnlySlave").is_none());
        // An old (4.x) slave never registers topics, even alone.
        let mut alone = RouteInfoManager::new(false);
        let old = RegisterBrokerRequestHeader {
            enable_acting_master: None,
            ..header("broker-b", 1, SLAVE, SLAVE_HA)
        };
        alone.register_broker(&old, Some(&slave_topics), None, T0);
        assert!(alone.pickup_topic_route_data("A").is_none());
    }

    #[test]
    fn unregister_slave_then_master() {
        let mut rim = master_and_slave();
        let unregister = |id: i64, addr: &str| UnRegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: addr.into(),
            cluster_name: "DefaultCluster".into(),
            broker_id: id,
        };
        rim.unregister_broker(&[unregister(1, SLAVE)]);
        let route = rim.pickup_topic_route_data("TopicA").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, MASTER.to_string())])
        );
        assert!(rim.broker_live_info("DefaultCluster", SLAVE).is_none());
        rim.unregister_broker(&[unregister(0, MASTER)]);
        assert!(rim.pickup_topic_route_data("TopicA").is_none());
        let info = rim.get_all_cluster_info();
        assert!(info.broker_addr_table.is_empty() && info.cluster_addr_table.is_empty());
    }

    #[test]
    fn brokers_expire_after_120_seconds_without_a_heartbeat() {
        let mut rim = master_and_slave();
        // The master keeps registering; the slave goes quiet after T0.
        let t = topics(&["TopicA", "TopicB"], 1);
        rim.register_broker(
            &header("broker-a", 0, MASTER, MASTER_HA),
            Some(&t),
            None,
            T0 + 90_000,
        );
        assert!(
            rim.scan_not_active_broker(T0 + 120_000).is_empty(),
            "exactly 120 s is still alive"
        );
        assert_eq!(rim.next_expiry_ms(), Some(T0 + 120_001));
        let expired = rim.scan_not_active_broker(T0 + 120_001);
        assert_eq!(
            expired,
            vec![BrokerAddrInfo {
                cluster_name: "DefaultCluster".into(),
                broker_addr: SLAVE.into()
            }]
        );
        let route = rim.pickup_topic_route_data("TopicA").unwrap();
        assert_eq!(route.broker_datas[0].broker_addrs.len(), 1);
        // A QUERY_DATA_VERSION heartbeat keeps the master alive past its last register.
        rim.update_broker_info_update_timestamp("DefaultCluster", MASTER, T0 + 200_000);
        assert!(rim.scan_not_active_broker(T0 + 300_000).is_empty());
        assert_eq!(rim.scan_not_active_broker(T0 + 320_001).len(), 1);
        assert!(rim.pickup_topic_route_data("TopicA").is_none());
        assert!(rim.get_all_cluster_info().cluster_addr_table.is_empty());
    }

    #[test]
    fn custom_heartbeat_timeout() {
        let mut rim = RouteInfoManager::new(false);
        let h = RegisterBrokerRequestHeader {
            heartbeat_timeout_millis: Some(10_000),
            ..header("broker-a", 0, MASTER, MASTER_HA)
        };
        rim.register_broker(&h, Some(&topics(&["A", "B"], 1)), None, T0);
        assert!(rim.scan_not_active_broker(T0 + 10_000).is_empty());
        assert_eq!(rim.scan_not_active_broker(T0 + 10_001).len(), 1);
    }

    #[test]
    fn data_version_queries() {
        let mut rim = master_and_slave();
        let registered = topics(&[], 1).data_version;
        assert_eq!(
            rim.query_broker_topic_config("DefaultCluster", MASTER),
            Some(&registered)
        );
        assert!(!rim.is_broker_topic_config_changed("DefaultCluster", MASTER, &registered));
        let newer = DataVersion {
            counter: 2,
            ..registered.clone()
        };
        assert!(rim.is_broker_topic_config_changed("DefaultCluster", MASTER, &newer));
        assert!(rim.is_broker_topic_config_changed("DefaultCluster", "unknown:1", &registered));
        // A new version re-registers the changed queue counts.
        let mut changed = topics(&["TopicA", "TopicB"], 2);
        if let Some(c) = changed.topics.iter_mut().find(|t| t.topic_name == "TopicA") {
            c.write_queue_nums = 8;
        }
        rim.register_broker(
            &header("broker-a", 0, MASTER, MASTER_HA),
            Some(&changed),
            None,
            T0 + 1,
        );
        let route = rim.pickup_topic_route_data("TopicA").unwrap();
        assert_eq!(route.queue_datas[0].write_queue_nums, 8);
        assert_eq!(
            rim.query_broker_topic_config("DefaultCluster", MASTER),
            Some(&changed.data_version)
        );
    }

    #[test]
    fn single_topic_from_an_unknown_broker_is_refused() {
        let mut rim = RouteInfoManager::new(false);
        let h = header("broker-a", 0, MASTER, MASTER_HA);
        assert_eq!(
            rim.register_broker(&h, Some(&topics(&["A"], 1)), None, T0),
            None
        );
        assert!(rim
            .register_broker(&h, Some(&topics(&["A", "B"], 1)), None, T0)
            .is_some());
        assert!(rim
            .register_broker(&h, Some(&topics(&["C"], 2)), None, T0)
            .is_some());
        assert!(rim.pickup_topic_route_data("C").is_some());
    }

    #[test]
    fn slave_promoted_to_master_keeps_one_id_per_address() {
        let mut rim = master_and_slave();
        rim.unregister_broker(&[UnRegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: MASTER.into(),
            cluster_name: "DefaultCluster".into(),
            broker_id: 0,
        }]);
        let promoted = header("broker-a", 0, SLAVE, SLAVE_HA);
        rim.register_broker(&promoted, Some(&topics(&["TopicA", "TopicB"], 3)), None, T0);
        let route = rim.pickup_topic_route_data("TopicA").unwrap();
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, SLAVE.to_string())])
        );
    }

    #[test]
    fn acting_master_for_a_masterless_group() {
        let mut rim = RouteInfoManager::new(true);
        let acting = |id, addr, ha| RegisterBrokerRequestHeader {
            enable_acting_master: Some(true),
            ..header("broker-a", id, addr, ha)
        };
        let t = topics(&["TopicA", "TopicB"], 1);
        rim.register_broker(&acting(0, MASTER, MASTER_HA), Some(&t), None, T0);
        rim.register_broker(&acting(1, SLAVE, SLAVE_HA), Some(&t), None, T0);
        rim.on_channel_destroy(&BrokerAddrInfo::new("DefaultCluster", MASTER));
        let route = rim.pickup_topic_route_data("TopicA").unwrap();
        // Write permission wiped, and the slave presented as id 0 for reads.
        assert_eq!(route.queue_datas[0].perm & perm::PERM_WRITE, 0);
        assert_eq!(
            route.broker_datas[0].broker_addrs,
            BTreeMap::from([(0, SLAVE.to_string())])
        );
        let body = route.encode_for(mq_version::V4_9_4, false);
        assert!(String::from_utf8(body)
            .unwrap()
            .contains(r#""brokerAddrs":{"0":"10.0.0.2:10911"}"#));
    }
}
