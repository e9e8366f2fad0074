//! Consumer offsets, group members, queue offsets, lookups and the slave's sync over real
//! sockets, each request written under RocketMQ's header field names.

use std::net::TcpListener;
use std::time::Duration;

use crate::broker::controller::tests::{
    client, create_topic, open_store, send_v2, start, start_ha_master, wait_for, TIMEOUT,
};
use crate::broker::{BrokerController, BrokerControllerConfig, BrokerSettings};
use crate::commitlog::record;
use crate::namesrv::{NameServer, NamesrvConfig};
use crate::remoting::frame::{decode_frame, Decoded, DEFAULT_MAX_FRAME_SIZE};
use crate::remoting::header::SendMessageResponseHeader;
use crate::remoting::{request_code, response_code, RemotingClient, RemotingCommand};

fn request(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut r = RemotingCommand::request(code, 0);
    for (k, v) in fields {
        r.ext_fields.insert((*k).into(), (*v).into());
    }
    r
}

fn offset_of(r: &RemotingCommand, field: &str) -> i64 {
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    r.ext_fields[field].parse().unwrap()
}

fn heartbeat(c: &mut RemotingClient, client_id: &str) {
    let mut hb = RemotingCommand::request(request_code::HEART_BEAT, 0);
    hb.body = format!(
        r#"{{"clientID":"{client_id}","producerDataSet":[],"consumerDataSet":[{{"groupName":"cg",
        "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
        "subscriptionDataSet":[{{"topic":"orders","subString":"*","tagsSet":[],"codeSet":[],
        "subVersion":1,"expressionType":"TAG","classFilterMode":false}}]}}]}}"#
    )
    .into_bytes();
    let r = c.invoke(hb, TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

fn commit(
    c: &mut RemotingClient,
    group: &str,
    topic: &str,
    queue: &str,
    offset: &str,
) -> RemotingCommand {
    c.invoke(
        request(
            request_code::UPDATE_CONSUMER_OFFSET,
            &[
                ("consumerGroup", group),
                ("topic", topic),
                ("queueId", queue),
                ("commitOffset", offset),
            ],
        ),
        TIMEOUT,
    )
    .unwrap()
}

fn query(c: &mut RemotingClient, queue: &str, extra: &[(&str, &str)]) -> RemotingCommand {
    let mut fields = vec![
        ("consumerGroup", "cg"),
        ("topic", "orders"),
        ("queueId", queue),
    ];
    fields.extend_from_slice(extra);
    c.invoke(
        request(request_code::QUERY_CONSUMER_OFFSET, &fields),
        TIMEOUT,
    )
    .unwrap()
}

#[test]
fn offsets_are_committed_queried_and_persisted_and_bad_commits_change_nothing() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    c.invoke(send_v2("orders", 0, b"x"), TIMEOUT).unwrap();
    // Never committed, and the queue's first message is in memory: a new group starts at 0.
    assert_eq!(offset_of(&query(&mut c, "0", &[]), "offset"), 0);
    let r = query(&mut c, "0", &[("setZeroIfNotFound", "false")]);
    assert_eq!(r.code, response_code::QUERY_NOT_FOUND);
    assert!(r.remark.unwrap().contains("consumerGroup cg"));

    // The group exists from its consumers' first heartbeat.
    let r = commit(&mut c, "cg", "orders", "0", "1");
    assert_eq!(r.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert!(r.remark.unwrap().contains("(consumerGroup)"));
    heartbeat(&mut c, "c1");
    let r = commit(&mut c, "cg", "nope", "0", "1");
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST);
    assert!(r.remark.unwrap().contains("(topic)"));
    let r = commit(&mut c, "cg", "orders", "77", "1");
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("(queueId)"));
    assert_eq!(
        offset_of(&query(&mut c, "0", &[]), "offset"),
        0,
        "nothing changed"
    );

    assert_eq!(
        commit(&mut c, "cg", "orders", "0", "1").code,
        response_code::SUCCESS
    );
    assert_eq!(offset_of(&query(&mut c, "0", &[]), "offset"), 1);
    let root = b.store.config().root.clone();
    b.controller.shutdown();
    let raw = std::fs::read(root.join("config/consumerOffset.json")).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(
        json["offsetTable"]["orders@cg"]["0"], 1,
        "persisted at shutdown"
    );
}

#[test]
fn a_groups_consumers_are_listed_until_their_connection_closes() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let addr = b.controller.local_addr();
    let mut c1 = client(addr);
    let mut c2 = client(addr);
    heartbeat(&mut c1, "10.0.0.1@a");
    heartbeat(&mut c2, "10.0.0.2@b");
    let list = |c: &mut RemotingClient| {
        c.invoke(
            request(
                request_code::GET_CONSUMER_LIST_BY_GROUP,
                &[("consumerGroup", "cg")],
            ),
            TIMEOUT,
        )
        .unwrap()
    };
    let r = list(&mut c1);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"consumerIdList": ["10.0.0.1@a", "10.0.0.2@b"]})
    );
    drop(c2);
    wait_for("the closed consumer to leave", || {
        let body: serde_json::Value = serde_json::from_slice(&list(&mut c1).body).ok()?;
        (body["consumerIdList"] == serde_json::json!(["10.0.0.1@a"])).then_some(())
    });
    let r = c1
        .invoke(
            request(
                request_code::GET_CONSUMER_LIST_BY_GROUP,
                &[("consumerGroup", "other")],
            ),
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("no consumer for this group, other")
    );
}

#[test]
fn queue_offsets_times_and_messages_by_id() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let mut ids = Vec::new();
    for body in [b"one".as_slice(), b"two", b"three"] {
        let r = c.invoke(send_v2("orders", 0, body), TIMEOUT).unwrap();
        ids.push(
            r.decode_custom_header::<SendMessageResponseHeader>()
                .unwrap()
                .msg_id,
        );
    }
    let q = [("topic", "orders"), ("queueId", "0")];
    let max = c
        .invoke(request(request_code::GET_MAX_OFFSET, &q), TIMEOUT)
        .unwrap();
    assert_eq!(offset_of(&max, "offset"), 3);
    let min = c
        .invoke(request(request_code::GET_MIN_OFFSET, &q), TIMEOUT)
        .unwrap();
    assert_eq!(offset_of(&min, "offset"), 0);
    let empty = [("topic", "orders"), ("queueId", "3")];
    let none = c
        .invoke(request(request_code::GET_MAX_OFFSET, &empty), TIMEOUT)
        .unwrap();
    assert_eq!(offset_of(&none, "offset"), 0);

    // The offset msg id: store host, then the commit log offset (`decodeMessageId`).
    let offset = u64::from_str_radix(&ids[1][16..], 16).unwrap();
    let view = c
        .invoke(
            request(
                request_code::VIEW_MESSAGE_BY_ID,
                &[("offset", &offset.to_string())],
            ),
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(view.code, response_code::SUCCESS);
    let record::Peeked::Record(r) = record::decode(&view.body, true).unwrap() else {
        panic!("not a record");
    };
    assert_eq!((r.body, r.queue_offset), (b"two".as_slice(), 1));
    let stored = r.store_timestamp;
    let bad = c
        .invoke(
            request(request_code::VIEW_MESSAGE_BY_ID, &[("offset", "1")]),
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(bad.code, response_code::SYSTEM_ERROR);
    assert!(bad.remark.unwrap().contains("(offset"));

    let earliest = c
        .invoke(
            request(request_code::GET_EARLIEST_MSG_STORETIME, &q),
            TIMEOUT,
        )
        .unwrap();
    assert!(offset_of(&earliest, "timestamp") <= stored);
    let search = |c: &mut RemotingClient, ts: i64| {
        let ts = ts.to_string();
        let r = c
            .invoke(
                request(
                    request_code::SEARCH_OFFSET_BY_TIMESTAMP,
                    &[("topic", "orders"), ("queueId", "0"), ("timestamp", &ts)],
                ),
                TIMEOUT,
            )
            .unwrap();
        offset_of(&r, "offset")
    };
    assert_eq!(search(&mut c, 0), 0, "before everything: the first");
    assert_eq!(search(&mut c, i64::MAX), 3, "after everything: the max");
    assert!(search(&mut c, stored) <= 1);
}

/// Whether the broker holds `group` (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
fn has_group(c: &mut RemotingClient, group: &str) -> bool {
    let request = RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 0);
    let r = c.invoke(request, TIMEOUT).unwrap();
    let groups: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    groups["subscriptionGroupTable"].get(group).is_some()
}

#[test]
fn a_slave_syncs_its_masters_topics_offsets_and_groups() {
    let ns = NameServer::start("127.0.0.1:0".parse().unwrap(), NamesrvConfig::default()).unwrap();
    let namesrv_addr = ns.local_addr().to_string();
    let (master, _ha) = start_ha_master(&namesrv_addr);
    let mut m = client(master.controller.local_addr());
    m.invoke(send_v2("orders", 0, b"x"), TIMEOUT).unwrap();
    heartbeat(&mut m, "c1");
    assert_eq!(
        commit(&mut m, "cg", "orders", "0", "1").code,
        response_code::SUCCESS
    );
    // The master's answers are RocketMQ's body shapes.
    let topics = m
        .invoke(
            RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG, 0),
            TIMEOUT,
        )
        .unwrap();
    let topics: serde_json::Value = serde_json::from_slice(&topics.body).unwrap();
    assert_eq!(topics["topicConfigTable"]["orders"]["readQueueNums"], 4);
    let groups = m
        .invoke(
            RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 0),
            TIMEOUT,
        )
        .unwrap();
    let groups: serde_json::Value = serde_json::from_slice(&groups.body).unwrap();
    assert_eq!(groups["subscriptionGroupTable"]["cg"]["groupName"], "cg");
    let delay = m
        .invoke(
            RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET, 0),
            TIMEOUT,
        )
        .unwrap();
    let delay: serde_json::Value = serde_json::from_slice(&delay.body).unwrap();
    assert_eq!(delay, serde_json::json!({"offsetTable": {}}));

    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = open_store(dir.path(), 0, listener.local_addr().unwrap().port());
    let slave = BrokerController::start(
        listener,
        store,
        None,
        None,
        BrokerControllerConfig {
            settings: BrokerSettings {
                broker_id: 1,
                is_slave: true,
                slave_read_enable: true.into(),
                ..BrokerSettings::default()
            },
            broker_role: "SLAVE".into(),
            namesrv_addr,
            // Long: the first sync must be the one the master's address triggers.
            slave_sync_interval: Duration::from_secs(3600),
            ..BrokerControllerConfig::default()
        },
    )
    .unwrap();
    let mut s = client(slave.local_addr());
    // The first sync is whole once its last table, the groups, arrived.
    wait_for("the slave's first sync", || {
        has_group(&mut s, "cg").then_some(())
    });
    // Then the housekeeping's syncs are done (a wake-up during the first leaves a second): the
    // test syncs by itself from here, each sync whole before the next step looks.
    while slave
        .events()
        .drain(Duration::from_millis(500))
        .iter()
        .any(|e| e.kind == crate::remoting::ServerEventKind::Processor("SLAVE_SYNC"))
    {}
    let sync = || {
        let synced = slave.slave_sync.as_ref().map(|s| s.sync_all());
        assert_eq!(synced, Some(Ok(true)));
    };
    assert_eq!(offset_of(&query(&mut s, "0", &[]), "offset"), 1);
    assert_eq!(
        slave.master_addr().as_deref(),
        Some(master.controller.local_addr().to_string().as_str())
    );
    // A commit to the slave is its own until the master's next sync overwrites the key.
    assert_eq!(
        commit(&mut s, "cg", "orders", "0", "5").code,
        response_code::SUCCESS
    );
    assert_eq!(offset_of(&query(&mut s, "0", &[]), "offset"), 5);
    sync();
    assert_eq!(offset_of(&query(&mut s, "0", &[]), "offset"), 1);
    let root = dir.path();
    let raw = std::fs::read(root.join("config/topics.json")).unwrap();
    assert!(
        String::from_utf8_lossy(&raw).contains("\"orders\""),
        "persisted"
    );
    assert!(root.join("config/subscriptionGroup.json").exists());

    // Later syncs take only what changed: one journal line each, no rewrite.
    assert_eq!(m.invoke(create_topic("later", 2), TIMEOUT).unwrap().code, 0);
    let mut group = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0);
    group.body = br#"{"groupName":"cg2"}"#.to_vec();
    assert_eq!(m.invoke(group, TIMEOUT).unwrap().code, 0);
    let files = ["topics.json", "subscriptionGroup.json"]
        .map(|f| std::fs::read(root.join("config").join(f)).unwrap());
    sync();
    assert!(has_group(&mut s, "cg2"));
    for (file, before) in ["topics", "subscriptionGroup"].iter().zip(files) {
        let journal = std::fs::read_to_string(root.join(format!("config/{file}.journal"))).unwrap();
        assert_eq!(journal.lines().count(), 1, "{file}: {journal}");
        let now = std::fs::read(root.join(format!("config/{file}.json"))).unwrap();
        assert_eq!(now, before, "{file}.json is not rewritten");
    }
    let journal = std::fs::read_to_string(root.join("config/topics.journal")).unwrap();
    assert!(journal.contains("\"later\""), "{journal}");
}

/// A consumer's connection that also reads what the broker sends on its own.
struct RawConsumer(std::net::TcpStream);

impl RawConsumer {
    fn connect(addr: std::net::SocketAddr) -> Self {
        let s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        Self(s)
    }

    fn send(&mut self, command: &RemotingCommand) {
        use std::io::Write;
        self.0
            .write_all(&command.encode(DEFAULT_MAX_FRAME_SIZE).unwrap())
            .unwrap();
    }

    fn next(&mut self) -> RemotingCommand {
        use std::io::Read;
        let mut len = [0u8; 4];
        self.0.read_exact(&mut len).unwrap();
        let mut frame = len.to_vec();
        frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
        self.0.read_exact(&mut frame[4..]).unwrap();
        match decode_frame(&frame, DEFAULT_MAX_FRAME_SIZE).unwrap() {
            Decoded::Frame { frame, .. } => RemotingCommand::decode(&frame).unwrap(),
            Decoded::NeedMore { .. } => unreachable!("a whole frame was read"),
        }
    }
}

#[test]
fn a_groups_members_are_told_when_it_changes() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let addr = b.controller.local_addr();
    let mut first = RawConsumer::connect(addr);
    let mut hb = RemotingCommand::request(request_code::HEART_BEAT, 1);
    hb.body = br#"{"clientID":"a","consumerDataSet":[{"groupName":"cg","subscriptionDataSet":[{"topic":"orders","subString":"*"}]}]}"#.to_vec();
    first.send(&hb);
    // Its own joining notifies it too, besides the heartbeat's answer (in either order).
    let (answer, notice) = match (first.next(), first.next()) {
        (a, n) if a.is_response() => (a, n),
        (n, a) => (a, n),
    };
    assert_eq!(answer.code, response_code::SUCCESS);
    assert_eq!(notice.code, request_code::NOTIFY_CONSUMER_IDS_CHANGED);
    assert!(notice.is_oneway() && !notice.is_response());
    assert_eq!(notice.ext_fields["consumerGroup"], "cg");
    // The same heartbeat again changes nothing: no notice before its answer.
    first.send(&hb);
    assert!(first.next().is_response());

    let mut second = client(addr);
    heartbeat(&mut second, "b");
    assert_eq!(
        first.next().code,
        request_code::NOTIFY_CONSUMER_IDS_CHANGED,
        "a joined"
    );
    drop(second);
    assert_eq!(
        first.next().code,
        request_code::NOTIFY_CONSUMER_IDS_CHANGED,
        "b left"
    );
}

#[test]
fn committed_offsets_reach_the_file_every_flush_interval() {
    let config = BrokerControllerConfig {
        flush_consumer_offset_interval: Duration::from_millis(20),
        ..BrokerControllerConfig::default()
    };
    let b = start(config, 0, None);
    let mut c = client(b.controller.local_addr());
    c.invoke(send_v2("orders", 0, b"x"), TIMEOUT).unwrap();
    heartbeat(&mut c, "c1");
    assert_eq!(
        commit(&mut c, "cg", "orders", "0", "1").code,
        response_code::SUCCESS
    );
    let path = b.store.config().root.join("config/consumerOffset.json");
    // Running, not shut down: only the periodic flush writes it.
    wait_for("the periodic flush", || {
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
        (json["offsetTable"]["orders@cg"]["0"] == 1).then_some(())
    });
}

#[test]
fn messages_found_by_key_and_by_unique_key_and_clear_refusals() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let send = |c: &mut RemotingClient, uniq: &str, keys: &str| {
        let props = format!("UNIQ_KEY\u{1}{uniq}\u{2}KEYS\u{1}{keys}\u{2}WAIT\u{1}true\u{2}");
        let r = c
            .invoke(
                crate::broker::processor::send::tests::send_v2(
                    "orders",
                    0,
                    &props,
                    uniq.as_bytes(),
                ),
                TIMEOUT,
            )
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    };
    send(&mut c, "U1", "order-1 customer-7");
    send(&mut c, "U2", "order-2 customer-7");
    let query = |c: &mut RemotingClient, key: &str, unique: bool, begin: i64, end: i64| {
        let absurd = begin > end;
        let (begin, end) = (begin.to_string(), end.to_string());
        let mut r = request(
            request_code::QUERY_MESSAGE,
            &[
                ("topic", "orders"),
                ("key", key),
                ("maxNum", "32"),
                ("beginTimestamp", &begin),
                ("endTimestamp", &end),
            ],
        );
        if unique {
            r.ext_fields
                .insert("_UNIQUE_KEY_QUERY".into(), "true".into());
        }
        // The index follows the log on its own thread: ask until it has caught up.
        wait_for("the index", || {
            let r = c.invoke(r.clone(), TIMEOUT).unwrap();
            (r.code != response_code::QUERY_NOT_FOUND || key == "nobody" || absurd).then_some(r)
        })
    };
    let bodies = |r: &RemotingCommand| {
        let mut out = Vec::new();
        let mut rest = r.body.as_slice();
        while let Ok(record::Peeked::Record(rec)) = record::decode(rest, true) {
            out.push(String::from_utf8(rec.body.to_vec()).unwrap());
            rest = &rest[rec.total_size as usize..];
        }
        out
    };
    let r = query(&mut c, "customer-7", false, 0, i64::MAX);
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(bodies(&r), ["U1", "U2"]);
    assert!(
        r.ext_fields["indexLastUpdatePhyoffset"]
            .parse::<i64>()
            .unwrap()
            > 0
    );
    assert_eq!(
        bodies(&query(&mut c, "order-2", false, 0, i64::MAX)),
        ["U2"]
    );
    assert_eq!(bodies(&query(&mut c, "U1", true, 0, i64::MAX)), ["U1"]);

    let none = query(&mut c, "nobody", false, 0, i64::MAX);
    assert_eq!(none.code, response_code::QUERY_NOT_FOUND);
    assert!(none.remark.unwrap().contains("\"nobody\""));
    let absurd = query(&mut c, "order-1", false, 10, 5);
    assert_eq!(absurd.code, response_code::QUERY_NOT_FOUND);
    assert!(absurd
        .remark
        .unwrap()
        .contains("beginTimestamp 10 is after endTimestamp 5"));
}
