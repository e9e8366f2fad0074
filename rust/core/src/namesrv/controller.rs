//! RocketMQ's `NamesrvController`: the remoting server with the name server's processor, and the
//! housekeeping thread that expires silent brokers.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::kv_config::KvConfigManager;
use super::processor::DefaultRequestProcessor;
use super::route_info::DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS;
use crate::remoting::{Executor, ProcessorTable, RemotingServer, ServerConfig, ServerEvents};

/// `NamesrvConfig`, the parts rocketha serves.
#[derive(Debug, Clone)]
pub struct NamesrvConfig {
    pub server: ServerConfig,
    /// How long a broker that names no heartbeat timeout stays routed without registering
    /// again (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, 120 s).
    pub broker_channel_expired_time: Duration,
    /// `supportActingMaster`: a master-less group's first slave serves reads as id 0.
    pub support_acting_master: bool,
    /// `kvConfigPath`: where the KV config is kept; `None`, in memory only.
    pub kv_config_path: Option<std::path::PathBuf>,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        Self {
            server: ServerConfig::default(),
            broker_channel_expired_time: Duration::from_millis(
                DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS.unsigned_abs(),
            ),
            support_acting_master: false,
            kv_config_path: None,
        }
    }
}

/// A running name server.
pub struct NameServer {
    server: RemotingServer,
    processor: Arc<DefaultRequestProcessor>,
}

impl NameServer {
    /// Binds `listen` (port 0 = OS-chosen) and serves until [`NameServer::shutdown`].
    pub fn start(listen: SocketAddr, config: NamesrvConfig) -> Result<Self, io::Error> {
        let events = Arc::new(ServerEvents::default());
        let kv = KvConfigManager::load(config.kv_config_path.as_deref()).map_err(|e| {
            let path = config.kv_config_path.as_deref().unwrap_or(Path::new(""));
            io::Error::new(e.kind(), format!("kvConfigPath {}: {e}", path.display()))
        })?;
        let processor = Arc::new(DefaultRequestProcessor::new(
            config.support_acting_master,
            config.broker_channel_expired_time,
            kv,
            events.clone(),
        ));
        processor.start_housekeeping()?;
        // NamesrvController.registerProcessor: every code the name server serves is answered on
        // the event loop, from the route table in memory.
        let mut table = ProcessorTable::default();
        table.register(
            DefaultRequestProcessor::CODES,
            processor.clone(),
            Executor::EventLoop,
        );
        let server =
            RemotingServer::start_with_events(listen, Arc::new(table), config.server, events);
        let server = match server {
            Ok(server) => server,
            Err(e) => {
                processor.stop();
                return Err(e);
            }
        };
        Ok(Self { server, processor })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Connections, registrations, expiries, with reasons.
    pub fn events(&self) -> &ServerEvents {
        self.server.events()
    }

    /// Stops serving and expiring; safe to call again.
    pub fn shutdown(&self) {
        self.server.shutdown();
        self.processor.stop();
    }
}

impl Drop for NameServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Instant;

    use super::*;
    use crate::protocol::body::{
        ClusterInfo, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
        TopicRouteData,
    };
    use crate::protocol::body_crc;
    use crate::remoting::codes::{request_code, response_code};
    use crate::remoting::header::{
        GetRouteInfoRequestHeader, QueryDataVersionRequestHeader, QueryDataVersionResponseHeader,
        RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
    };
    use crate::remoting::{RemotingClient, RemotingCommand, ServerEvent};

    const TIMEOUT: Duration = Duration::from_secs(10);
    /// A RocketMQ 5 broker's `MQVersion` ordinal.
    const V5: i32 = 479;
    const MASTER: &str = "10.0.0.1:10911";
    const MASTER_HA: &str = "10.0.0.1:10912";
    const SLAVE: &str = "10.0.0.2:10911";

    fn start(config: NamesrvConfig) -> NameServer {
        NameServer::start("127.0.0.1:0".parse().unwrap(), config).unwrap()
    }

    fn client(ns: &NameServer) -> RemotingClient {
        RemotingClient::connect(ns.local_addr(), TIMEOUT).unwrap()
    }

    fn data_version(counter: i64) -> DataVersion {
        DataVersion {
            state_version: 0,
            timestamp: 1_700_000_000_000,
            counter,
        }
    }

    fn register_request(id: i64, addr: &str, ha: &str) -> RemotingCommand {
        let topics = ["TopicA", "TopicB"]
            .into_iter()
            .map(|t| {
                let config = TopicConfig {
                    topic_name: t.into(),
                    read_queue_nums: 4,
                    write_queue_nums: 4,
                    ..TopicConfig::default()
                };
                (t.to_string(), config)
            })
            .collect();
        let body = RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: topics,
                data_version: data_version(1),
            },
            filter_server_list: Vec::new(),
        }
        .encode();
        let mut request = RemotingCommand::request(request_code::REGISTER_BROKER, 0);
        request.version = V5;
        request.write_custom_header(&RegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: addr.into(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: ha.into(),
            broker_id: id,
            heartbeat_timeout_millis: None,
            enable_acting_master: Some(false),
            compressed: false,
            body_crc32: body_crc(&body),
            zone_name: None,
        });
        request.body = body;
        request
    }

    fn register(
        c: &mut RemotingClient,
        id: i64,
        addr: &str,
        ha: &str,
    ) -> RegisterBrokerResponseHeader {
        let response = c.invoke(register_request(id, addr, ha), TIMEOUT).unwrap();
        assert_eq!(
            response.code,
            response_code::SUCCESS,
            "{:?}",
            response.remark
        );
        assert!(response.body.is_empty());
        response.decode_custom_header().unwrap()
    }

    fn route(
        c: &mut RemotingClient,
        topic: &str,
        version: i32,
        standard: Option<bool>,
    ) -> RemotingCommand {
        let mut request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC, 0);
        request.version = version;
        request.write_custom_header(&GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: standard,
        });
        c.invoke(request, TIMEOUT).unwrap()
    }

    fn addrs(c: &mut RemotingClient) -> Option<BTreeMap<i64, String>> {
        let response = route(c, "TopicA", V5, None);
        if response.code == response_code::TOPIC_NOT_EXIST {
            return None;
        }
        let route = TopicRouteData::decode(&response.body).unwrap();
        Some(route.broker_datas[0].broker_addrs.clone())
    }

    fn wait_event(ns: &NameServer, kind: &str, pred: impl Fn(&ServerEvent) -> bool) -> ServerEvent {
        let deadline = Instant::now() + TIMEOUT;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            for event in ns.events().drain(Duration::from_millis(100)) {
                if event.kind.name() == kind && pred(&event) {
                    return event;
                }
                seen.push(event);
            }
        }
        panic!("no {kind} event; saw {seen:?}");
    }

    #[test]
    fn master_and_slave_register_and_clients_read_the_route() {
        let ns = start(NamesrvConfig::default());
        let mut c = client(&ns);
        let master = register(&mut c, 0, MASTER, MASTER_HA);
        assert_eq!(master, RegisterBrokerResponseHeader::default());
        // The slave learns where to replicate from (seed 004).
        let slave = register(&mut c, 1, SLAVE, "10.0.0.2:10912");
        assert_eq!(slave.ha_server_addr.as_deref(), Some(MASTER_HA));
        assert_eq!(slave.master_addr.as_deref(), Some(MASTER));
        wait_event(&ns, "REGISTERED", |e| e.addr == SLAVE);

        // Clients from 4.9.4 on, or asking for it, get quoted keys; older ones fastjson's bare.
        let quoted = r#""brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}"#;
        let bare = r#""brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}"#;
        for (version, standard, expected) in
            [(V5, None, quoted), (0, Some(true), quoted), (0, None, bare)]
        {
            let response = route(&mut c, "TopicA", version, standard);
            assert_eq!(response.code, response_code::SUCCESS);
            let body = String::from_utf8(response.body.clone()).unwrap();
            assert!(body.contains(expected), "version {version}: {body}");
            let decoded = TopicRouteData::decode(&response.body).unwrap();
            assert_eq!(decoded.queue_datas[0].write_queue_nums, 4);
        }
        assert_eq!(
            addrs(&mut c),
            Some(BTreeMap::from([(0, MASTER.into()), (1, SLAVE.into())]))
        );

        let response = c
            .invoke(
                RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO, 0),
                TIMEOUT,
            )
            .unwrap();
        let info = ClusterInfo::decode(&response.body).unwrap();
        assert_eq!(info.cluster_addr_table["DefaultCluster"].len(), 1);
        assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 2);
        let response = c
            .invoke(
                RemotingCommand::request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 0),
                TIMEOUT,
            )
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(list, serde_json::json!({"topicList": ["TopicA", "TopicB"]}));

        // QUERY_DATA_VERSION: unchanged for the registered version, changed for another.
        for (counter, changed) in [(1, false), (2, true)] {
            let mut query = RemotingCommand::request(request_code::QUERY_DATA_VERSION, 0);
            query.write_custom_header(&QueryDataVersionRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: MASTER.into(),
                cluster_name: "DefaultCluster".into(),
                broker_id: 0,
            });
            query.body = crate::protocol::json::to_json(
                &data_version(counter),
                crate::protocol::json::JsonStyle::Fastjson,
            )
            .into_bytes();
            let response = c.invoke(query, TIMEOUT).unwrap();
            let header: QueryDataVersionResponseHeader = response.decode_custom_header().unwrap();
            assert_eq!(header.changed, changed);
            assert_eq!(
                crate::protocol::json::parse_lenient::<DataVersion>(&response.body, "DataVersion")
                    .unwrap(),
                data_version(1)
            );
        }
    }

    #[test]
    fn unregister_and_unknown_topics() {
        let ns = start(NamesrvConfig::default());
        let mut c = client(&ns);
        register(&mut c, 0, MASTER, MASTER_HA);
        register(&mut c, 1, SLAVE, "10.0.0.2:10912");
        let unregister = |c: &mut RemotingClient, id: i64, addr: &str| {
            let mut request = RemotingCommand::request(request_code::UNREGISTER_BROKER, 0);
            request.write_custom_header(&UnRegisterBrokerRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: addr.into(),
                cluster_name: "DefaultCluster".into(),
                broker_id: id,
            });
            let response = c.invoke(request, TIMEOUT).unwrap();
            assert_eq!(response.code, response_code::SUCCESS);
        };
        unregister(&mut c, 1, SLAVE);
        assert_eq!(addrs(&mut c), Some(BTreeMap::from([(0, MASTER.into())])));
        unregister(&mut c, 0, MASTER);
        let response = route(&mut c, "TopicA", V5, None);
        assert_eq!(response.code, response_code::TOPIC_NOT_EXIST);
        assert_eq!(
            response.remark.as_deref(),
            Some("No topic route info in name server for the topic: TopicA\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
        );
    }

    #[test]
    fn bad_requests_are_answered_not_dropped() {
        let ns = start(NamesrvConfig::default());
        let mut c = client(&ns);
        let mut bad_crc = register_request(0, MASTER, MASTER_HA);
        bad_crc.body.push(b' ');
        let response = c.invoke(bad_crc, TIMEOUT).unwrap();
        assert_eq!(response.code, response_code::SYSTEM_ERROR);
        assert_eq!(response.remark.as_deref(), Some("crc32 not match"));

        let mut no_topic = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC, 0);
        no_topic
            .ext_fields
            .insert("acceptStandardJsonOnly".into(), "true".into());
        let response = c.invoke(no_topic, TIMEOUT).unwrap();
        assert_eq!(response.code, response_code::SYSTEM_ERROR);
        assert_eq!(
            response.remark.as_deref(),
            Some("GET_ROUTEINFO_BY_TOPIC header: field `topic` is missing")
        );

        let response = c
            .invoke(
                // GET_NAMESRV_CONFIG: not served.
                RemotingCommand::request(319, 0),
                TIMEOUT,
            )
            .unwrap();
        assert_eq!(response.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
        assert_eq!(
            response.remark.as_deref(),
            Some(" request type 319 not supported")
        );
        // The connection is still good.
        register(&mut c, 0, MASTER, MASTER_HA);
    }

    #[test]
    fn kv_config_is_put_read_listed_and_deleted_and_kept_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = || NamesrvConfig {
            kv_config_path: Some(dir.path().join("kvConfig.json")),
            ..NamesrvConfig::default()
        };
        let kv = |c: &mut RemotingClient, code: i32, fields: &[(&str, &str)]| {
            let mut request = RemotingCommand::request(code, 0);
            for (k, v) in fields {
                request.ext_fields.insert((*k).into(), (*v).into());
            }
            c.invoke(request, TIMEOUT).unwrap()
        };
        let ns = start(config());
        let mut c = client(&ns);
        let entry = [("namespace", "ns"), ("key", "k")];
        let put = [&entry[..], &[("value", "v1")]].concat();
        assert_eq!(kv(&mut c, request_code::PUT_KV_CONFIG, &put).code, 0);
        let got = kv(&mut c, request_code::GET_KV_CONFIG, &entry);
        assert_eq!(got.ext_fields["value"], "v1");
        let r = kv(&mut c, request_code::PUT_KV_CONFIG, &entry);
        assert_eq!(r.remark.as_deref(), Some("`value` is missing"));
        ns.shutdown();

        let ns = start(config());
        let mut c = client(&ns);
        let listed = kv(&mut c, request_code::GET_KVLIST_BY_NAMESPACE, &entry[..1]);
        let body: serde_json::Value = serde_json::from_slice(&listed.body).unwrap();
        assert_eq!(body["table"]["k"], "v1");
        assert_eq!(kv(&mut c, request_code::DELETE_KV_CONFIG, &entry).code, 0);
        let gone = kv(&mut c, request_code::GET_KV_CONFIG, &entry);
        assert_eq!(gone.code, response_code::QUERY_NOT_FOUND);
        assert_eq!(
            gone.remark.as_deref(),
            Some("No config item, Namespace: ns Key: k")
        );
        ns.shutdown();
    }

    #[test]
    fn silent_brokers_expire() {
        let ns = start(NamesrvConfig {
            broker_channel_expired_time: Duration::from_millis(300),
            ..NamesrvConfig::default()
        });
        let mut c = client(&ns);
        let started = Instant::now();
        register(&mut c, 0, MASTER, MASTER_HA);
        let event = wait_event(&ns, "EXPIRED", |e| e.addr == MASTER);
        assert!(event.problem);
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(addrs(&mut c), None);
        // The connection it registered over stays open; only the route went.
        register(&mut c, 0, MASTER, MASTER_HA);
        assert!(addrs(&mut c).is_some());
    }

    #[test]
    fn a_broker_announcing_an_endless_heartbeat_timeout_breaks_nothing() {
        let ns = start(NamesrvConfig {
            broker_channel_expired_time: Duration::from_millis(300),
            ..NamesrvConfig::default()
        });
        let mut c = client(&ns);
        let mut endless = register_request(0, MASTER, MASTER_HA);
        endless
            .ext_fields
            .insert("heartbeatTimeoutMillis".into(), i64::MAX.to_string());
        let response = c.invoke(endless, TIMEOUT).unwrap();
        assert_eq!(response.code, response_code::SUCCESS);
        register(&mut c, 1, SLAVE, "10.0.0.2:10912");
        wait_event(&ns, "EXPIRED", |e| e.addr == SLAVE);
        assert_eq!(addrs(&mut c), Some(BTreeMap::from([(0, MASTER.into())])));
    }

    #[test]
    fn a_closed_connection_removes_the_brokers_registered_over_it() {
        let ns = start(NamesrvConfig::default());
        let mut observer = client(&ns);
        let mut first = client(&ns);
        register(&mut first, 0, MASTER, MASTER_HA);
        // The broker registers again over a new connection: closing the old one keeps it.
        let mut second = client(&ns);
        register(&mut second, 0, MASTER, MASTER_HA);
        drop(first);
        wait_event(&ns, "CLOSED", |_| true);
        assert!(addrs(&mut observer).is_some());
        drop(second);
        let event = wait_event(&ns, "UNREGISTERED", |e| e.addr == MASTER);
        assert!(event.reason.contains("onChannelDestroy"), "{event:?}");
        assert_eq!(addrs(&mut observer), None);
    }
}
