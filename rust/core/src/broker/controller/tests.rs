//! The controller over real sockets: requests built field by field as a Java client writes
//! them, answered through the remoting server; registration against an in-process name server.

use std::sync::mpsc;
use std::time::Instant;

use super::*;
use crate::commitlog::record;
use crate::ha::HaConfig;
use crate::namesrv::{NameServer, NamesrvConfig};
use crate::protocol::body::TopicRouteData;
use crate::remoting::header::{
    CreateTopicRequestHeader, GetRouteInfoRequestHeader, SendMessageResponseHeader,
};
use crate::remoting::{
    request_code, response_code, ClientConfig, NettyRemotingClient, RemotingClient,
    RemotingCommand, RemotingServer, RequestContext, RequestProcessor, Responder, ServerConfig,
};
use crate::store::StoreConfig;

pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct Broker {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) controller: BrokerController,
    pub(crate) _dir: tempfile::TempDir,
}

pub(crate) fn open_store(
    dir: &std::path::Path,
    sync_slaves: usize,
    port: u16,
) -> Arc<MessageStore> {
    let mut config = StoreConfig::new(dir);
    config.mapped_file_size = 64 * 1024;
    config.sync_slaves = sync_slaves;
    config.slave_timeout = Duration::from_secs(60);
    config.store_host = ([127, 0, 0, 1], port).into();
    Arc::new(MessageStore::open(config).unwrap())
}

pub(crate) fn start(
    config: BrokerControllerConfig,
    sync_slaves: usize,
    ha_master: Option<Arc<HaMaster>>,
) -> Broker {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = open_store(
        dir.path(),
        sync_slaves,
        listener.local_addr().unwrap().port(),
    );
    let controller =
        BrokerController::start(listener, store.clone(), ha_master, None, config).unwrap();
    Broker {
        store,
        controller,
        _dir: dir,
    }
}

/// A master with its HA service, registering with `namesrv_addr` and advertising its HA port.
pub(crate) fn start_ha_master(namesrv_addr: &str) -> (Broker, Arc<HaMaster>) {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = open_store(dir.path(), 0, listener.local_addr().unwrap().port());
    let ha = Arc::new(
        HaMaster::start(
            store.clone(),
            "127.0.0.1:0".parse().unwrap(),
            HaConfig::default(),
        )
        .unwrap(),
    );
    let config = BrokerControllerConfig {
        namesrv_addr: namesrv_addr.into(),
        ha_server_addr: ha.local_addr().to_string(),
        ..BrokerControllerConfig::default()
    };
    let controller =
        BrokerController::start(listener, store.clone(), Some(ha.clone()), None, config).unwrap();
    let broker = Broker {
        store,
        controller,
        _dir: dir,
    };
    (broker, ha)
}

pub(crate) fn client(addr: std::net::SocketAddr) -> RemotingClient {
    RemotingClient::connect(addr, TIMEOUT).unwrap()
}

/// A producer's SEND_MESSAGE_V2, with the unique key a Java producer stamps.
pub(crate) fn send_v2(topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
    crate::broker::processor::send::tests::send_v2(
        topic,
        queue_id,
        "UNIQ_KEY\u{1}AB\u{2}WAIT\u{1}true\u{2}",
        body,
    )
}

pub(crate) fn create_topic(topic: &str, queues: i32) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC, 0);
    request.write_custom_header(&CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
        attributes: None,
    });
    request
}

#[test]
fn a_send_over_the_socket_is_answered_with_the_header_fields() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let response = c.invoke(send_v2("orders", 1, b"hello"), TIMEOUT).unwrap();
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
    let header: SendMessageResponseHeader = response.decode_custom_header().unwrap();
    assert_eq!((header.queue_id, header.queue_offset), (1, 0));
    // The msg id names the real port the broker listens on.
    assert_eq!(
        header.msg_id,
        record::msg_id(&b.controller.local_addr(), 0),
        "store host is brokerIP1:listenPort"
    );
    assert!(b.store.max_offset() > 0);
}

#[test]
fn a_created_topic_takes_sends_without_auto_create() {
    let mut config = BrokerControllerConfig::default();
    config.settings.auto_create_topic = false.into();
    let b = start(config, 0, None);
    let mut c = client(b.controller.local_addr());
    let refused = c.invoke(send_v2("payments", 0, b"x"), TIMEOUT).unwrap();
    assert_eq!(refused.code, response_code::TOPIC_NOT_EXIST);
    assert_eq!(
        b.store.max_offset(),
        0,
        "nothing written for a refused send"
    );
    let created = c.invoke(create_topic("payments", 2), TIMEOUT).unwrap();
    assert_eq!(created.code, response_code::SUCCESS, "{:?}", created.remark);
    let sent = c.invoke(send_v2("payments", 1, b"x"), TIMEOUT).unwrap();
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    let out_of_range = c.invoke(send_v2("payments", 2, b"x"), TIMEOUT).unwrap();
    assert_eq!(out_of_range.code, response_code::SYSTEM_ERROR);
    let bad = c.invoke(create_topic("bad topic!", 2), TIMEOUT).unwrap();
    assert_eq!(bad.code, response_code::SYSTEM_ERROR);
    assert!(bad.remark.unwrap().contains("illegal characters"));
}

#[test]
fn an_unknown_code_is_not_supported() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let response = c.invoke(RemotingCommand::request(3, 0), TIMEOUT).unwrap();
    assert_eq!(response.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        response.remark.as_deref(),
        Some(" request type 3 not supported")
    );
}

#[test]
fn a_sync_master_send_is_answered_only_after_the_ack() {
    let b = start(BrokerControllerConfig::default(), 1, None);
    let gt = b.store.group_transfer().unwrap().clone();
    // One slave connected, in sync at offset 0.
    gt.on_acks(vec![0]);
    let addr = b.controller.local_addr();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut c = client(addr);
        let _ = tx.send(c.invoke(send_v2("orders", 0, b"replicate me"), TIMEOUT));
    });
    let deadline = Instant::now() + TIMEOUT;
    while b.store.max_offset() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "answered before any slave acked"
    );
    gt.on_acks(vec![b.store.max_offset()]);
    let response = rx.recv_timeout(TIMEOUT).unwrap().unwrap();
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
    // Counted when the deferred answer went out.
    let mut c = client(addr);
    let info = c
        .invoke(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO, 0),
            TIMEOUT,
        )
        .unwrap();
    let table: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    assert_eq!(table["table"]["msgPutTotalTodayNow"], "1");
}

#[test]
fn heartbeats_are_remembered_per_connection_and_runtime_info_is_a_kv_table() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let mut hb = RemotingCommand::request(request_code::HEART_BEAT, 0);
    hb.body = br#"{"clientID":"10.0.0.9@1","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY"}]}"#.to_vec();
    assert_eq!(c.invoke(hb, TIMEOUT).unwrap().code, response_code::SUCCESS);
    let clients = b.controller.clients();
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0].client_id, "10.0.0.9@1");
    assert!(clients[0].consumer_groups.contains("cg"));
    let mut unregister = RemotingCommand::request(request_code::UNREGISTER_CLIENT, 0);
    unregister
        .ext_fields
        .insert("clientID".into(), "10.0.0.9@1".into());
    unregister
        .ext_fields
        .insert("producerGroup".into(), "pg".into());
    assert_eq!(
        c.invoke(unregister, TIMEOUT).unwrap().code,
        response_code::SUCCESS
    );
    assert!(b.controller.clients()[0].producer_groups.is_empty());

    c.invoke(send_v2("orders", 0, b"x"), TIMEOUT).unwrap();
    let info = c
        .invoke(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO, 0),
            TIMEOUT,
        )
        .unwrap();
    let table: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    let table = &table["table"];
    assert_eq!(table["brokerRole"], "ASYNC_MASTER");
    assert_eq!(table["msgPutTotalTodayNow"], "1");
    assert_eq!(
        table["commitLogMaxOffset"],
        b.store.max_offset().to_string()
    );
    drop(c);
    let deadline = Instant::now() + TIMEOUT;
    while !b.controller.clients().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(b.controller.clients().is_empty(), "forgotten on close");
}

pub(crate) fn route(ns: &NameServer, topic: &str) -> Option<TopicRouteData> {
    let mut c = client(ns.local_addr());
    let mut request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC, 0);
    request.write_custom_header(&GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: Some(true),
    });
    let response = c.invoke(request, TIMEOUT).unwrap();
    (response.code == response_code::SUCCESS)
        .then(|| TopicRouteData::decode(&response.body).unwrap())
}

pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_auto_created_topic_is_routed_at_once_and_shutdown_unregisters() {
    let ns = NameServer::start("127.0.0.1:0".parse().unwrap(), NamesrvConfig::default()).unwrap();
    let config = BrokerControllerConfig {
        // A dead name server first: it is reported, and the live one still gets registered.
        namesrv_addr: format!("127.0.0.1:1;{}", ns.local_addr()),
        // Long: the route must come from the register a topic change triggers.
        register_name_server_period: Duration::from_secs(3600),
        ..BrokerControllerConfig::default()
    };
    let b = start(config, 0, None);
    let tbw = wait_for("TBW102's route", || route(&ns, "TBW102"));
    let broker_addr = b.controller.local_addr().to_string();
    assert_eq!(tbw.broker_datas[0].broker_addrs[&0], broker_addr);
    assert!(route(&ns, "fresh").is_none());
    let mut c = client(b.controller.local_addr());
    let sent = c.invoke(send_v2("fresh", 0, b"x"), TIMEOUT).unwrap();
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    let fresh = wait_for("the new topic's route", || route(&ns, "fresh"));
    assert_eq!(fresh.queue_datas[0].write_queue_nums, 4);
    let events = b.controller.events().drain(Duration::from_millis(10));
    assert!(
        events
            .iter()
            .any(|e| e.kind.name() == "REGISTER_FAILED" && e.addr == "127.0.0.1:1" && e.problem),
        "{events:?}"
    );
    // A shutdown that waited for the hour's period would hang here.
    b.controller.shutdown();
    assert!(route(&ns, "fresh").is_none(), "unregistered at shutdown");
}

/// A name server that answers at once, except a registration naming `topic`: that one it
/// hands to the test, which answers it when it wants.
struct HoldingNameServer {
    topic: &'static str,
    held: Mutex<mpsc::Sender<(Responder, RemotingCommand)>>,
}

impl RequestProcessor for HoldingNameServer {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        let answer = RemotingCommand::response_to(&request, response_code::SUCCESS, None);
        let names_topic = request.code == request_code::REGISTER_BROKER
            && request
                .body
                .windows(self.topic.len())
                .any(|w| w == self.topic.as_bytes());
        if !names_topic {
            return Some(answer);
        }
        self.held
            .lock()
            .unwrap()
            .send((ctx.responder(), answer))
            .unwrap();
        None
    }
}

#[test]
fn a_created_topic_is_answered_once_the_name_server_has_its_route() {
    let (held_tx, held) = mpsc::channel();
    let ns = RemotingServer::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(HoldingNameServer {
            topic: "made",
            held: Mutex::new(held_tx),
        }),
        ServerConfig::default(),
    )
    .unwrap();
    let config = BrokerControllerConfig {
        namesrv_addr: ns.local_addr().to_string(),
        // Long: the registration must be the one the creation triggers.
        register_name_server_period: Duration::from_secs(3600),
        ..BrokerControllerConfig::default()
    };
    let b = start(config, 0, None);
    let addr = b.controller.local_addr().to_string();
    let c = NettyRemotingClient::start(ClientConfig::default()).unwrap();
    let (answered_tx, answered) = mpsc::channel();
    c.invoke_async(&addr, create_topic("made", 4), TIMEOUT, move |r| {
        answered_tx.send(r).unwrap();
    })
    .unwrap();
    let (responder, registered) = held
        .recv_timeout(TIMEOUT)
        .expect("the topic's registration");
    // A request behind it on the same connection: an answer sent before the registration
    // would have reached its callback before this returns.
    let info = RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO, 0);
    c.invoke_sync(&addr, info, TIMEOUT).unwrap();
    assert!(
        answered.try_recv().is_err(),
        "answered before the name server took the route"
    );
    responder.send(registered);
    let created = answered.recv_timeout(TIMEOUT).unwrap().unwrap();
    assert_eq!(created.code, response_code::SUCCESS, "{:?}", created.remark);
    // The same topic again changes nothing: answered at once, nothing registered.
    let again = c
        .invoke_sync(&addr, create_topic("made", 4), TIMEOUT)
        .unwrap();
    assert_eq!(again.code, response_code::SUCCESS, "{:?}", again.remark);
    assert!(
        held.try_recv().is_err(),
        "an unchanged topic is not registered"
    );
}

#[test]
fn a_slave_takes_the_master_ha_address_from_the_name_server() {
    let ns = NameServer::start("127.0.0.1:0".parse().unwrap(), NamesrvConfig::default()).unwrap();
    let namesrv_addr = ns.local_addr().to_string();

    let (master, ha_master) = start_ha_master(&namesrv_addr);
    let master_store = master.store.clone();

    let slave_dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let slave_store = open_store(slave_dir.path(), 0, listener.local_addr().unwrap().port());
    let ha_client =
        Arc::new(HaClient::start(slave_store.clone(), None, HaConfig::default(), 1).unwrap());
    let mut settings = BrokerSettings {
        broker_id: 1,
        is_slave: true,
        ..BrokerSettings::default()
    };
    settings.auto_create_topic = true.into();
    let slave = BrokerController::start(
        listener,
        slave_store.clone(),
        None,
        Some(ha_client.clone()),
        BrokerControllerConfig {
            settings,
            broker_role: "SLAVE".into(),
            namesrv_addr: namesrv_addr.clone(),
            update_master_ha_server_addr_periodically: true,
            // Short: the test waits for the registration that follows a new master.
            register_name_server_period: Duration::from_millis(100),
            ..BrokerControllerConfig::default()
        },
    )
    .unwrap();
    wait_for("the master's HA address", || ha_client.master_address());
    assert_eq!(
        ha_client.master_address().unwrap(),
        ha_master.local_addr().to_string()
    );

    let mut c = client(master.controller.local_addr());
    let sent = c
        .invoke(send_v2("orders", 0, b"to the slave"), TIMEOUT)
        .unwrap();
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
    wait_for("the slave to catch up", || {
        (slave_store.max_offset() == master_store.max_offset()).then_some(())
    });
    // The master reports the slave's ack.
    let acked = master_store.max_offset().to_string();
    wait_for("the master to report the slave's ack", || {
        let info = c
            .invoke(
                RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO, 0),
                TIMEOUT,
            )
            .unwrap();
        let table: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
        (table["table"]["slaveAckOffsets"] == acked.as_str()).then_some(())
    });
    // The slave's own port refuses sends, saying why, and reports whom it replicates from.
    let mut s = client(slave.local_addr());
    let info = s
        .invoke(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO, 0),
            TIMEOUT,
        )
        .unwrap();
    let table: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    assert_eq!(table["table"]["brokerRole"], "SLAVE");
    assert_eq!(
        table["table"]["haMasterAddress"],
        ha_master.local_addr().to_string()
    );
    let refused = s.invoke(send_v2("orders", 0, b"no"), TIMEOUT).unwrap();
    assert_eq!(refused.code, response_code::SERVICE_NOT_AVAILABLE);
    assert!(refused.remark.unwrap().contains("SLAVE"));
    // The master goes (and unregisters); another takes its place with another HA address: the
    // slave follows it at its next registration (seed 004).
    master.controller.shutdown();
    ha_master.shutdown();
    let (_new_master, new_ha) = start_ha_master(&namesrv_addr);
    let new_addr = new_ha.local_addr().to_string();
    assert_ne!(new_addr, ha_master.local_addr().to_string());
    wait_for("the slave to follow the new master", || {
        (ha_client.master_address().as_deref() == Some(new_addr.as_str())).then_some(())
    });
    drop(slave);
}

#[test]
fn the_broker_registers_each_code_it_serves_once() {
    use crate::remoting::request_code as rc;
    let b = start(BrokerControllerConfig::default(), 0, None);
    // What the broker served before its processors were registered by code, the timer's
    // and the recall's, and no more:
    // a code lost from the table would be answered REQUEST_CODE_NOT_SUPPORTED.
    let served = std::collections::BTreeSet::from([
        rc::SEND_MESSAGE,
        rc::SEND_MESSAGE_V2,
        rc::SEND_BATCH_MESSAGE,
        rc::CONSUMER_SEND_MSG_BACK,
        rc::PULL_MESSAGE,
        rc::LITE_PULL_MESSAGE,
        rc::QUERY_CONSUMER_OFFSET,
        rc::UPDATE_CONSUMER_OFFSET,
        rc::GET_CONSUMER_LIST_BY_GROUP,
        rc::HEART_BEAT,
        rc::UNREGISTER_CLIENT,
        rc::CHECK_CLIENT_CONFIG,
        rc::END_TRANSACTION,
        rc::QUERY_MESSAGE,
        rc::VIEW_MESSAGE_BY_ID,
        rc::UPDATE_AND_CREATE_TOPIC,
        rc::DELETE_TOPIC_IN_BROKER,
        rc::GET_TOPIC_CONFIG,
        rc::GET_TOPIC_STATS_INFO,
        rc::GET_CONSUME_STATS,
        rc::GET_MAX_OFFSET,
        rc::GET_MIN_OFFSET,
        rc::GET_EARLIEST_MSG_STORETIME,
        rc::SEARCH_OFFSET_BY_TIMESTAMP,
        rc::INVOKE_BROKER_TO_RESET_OFFSET,
        rc::GET_ALL_TOPIC_CONFIG,
        rc::GET_ALL_CONSUMER_OFFSET,
        rc::GET_ALL_DELAY_OFFSET,
        rc::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        rc::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        rc::DELETE_SUBSCRIPTIONGROUP,
        rc::GET_SUBSCRIPTIONGROUP_CONFIG,
        rc::QUERY_CONSUME_QUEUE,
        rc::QUERY_TOPIC_CONSUME_BY_WHO,
        rc::GET_CONSUMER_CONNECTION_LIST,
        rc::GET_PRODUCER_CONNECTION_LIST,
        rc::GET_CONSUMER_RUNNING_INFO,
        rc::LOCK_BATCH_MQ,
        rc::UNLOCK_BATCH_MQ,
        rc::GET_BROKER_RUNTIME_INFO,
        rc::GET_BROKER_CONFIG,
        rc::UPDATE_BROKER_CONFIG,
        rc::GET_BROKER_EPOCH_CACHE,
        rc::NOTIFY_BROKER_ROLE_CHANGED,
        rc::GET_TIMER_CHECK_POINT,
        rc::GET_TIMER_METRICS,
        rc::RECALL_MESSAGE,
        rc::POP_MESSAGE,
        rc::ACK_MESSAGE,
        rc::BATCH_ACK_MESSAGE,
        rc::CHANGE_MESSAGE_INVISIBLETIME,
    ]);
    assert_eq!(b.controller.processor.table.codes(), served);
}
