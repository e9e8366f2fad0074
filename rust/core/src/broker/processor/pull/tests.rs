//! Pulls over real sockets, each request written field by field under
//! `PullMessageRequestHeader`'s names as a Java consumer sends it; answers checked against the
//! commit log's own bytes.

use std::net::TcpListener;
use std::time::Duration;

use super::*;
use crate::broker::controller::tests::{
    client, create_topic, open_store, start, start_ha_master, wait_for, Broker, TIMEOUT,
};
use crate::broker::{BrokerController, BrokerControllerConfig};
use crate::ha::client::HaClient;
use crate::ha::HaConfig;
use crate::remoting::header::SendMessageResponseHeader;
use crate::remoting::{request_code, RemotingClient};

/// PULL_MESSAGE with every field a 4.9 consumer writes; `sub` set adds FLAG_SUBSCRIPTION.
pub(crate) fn pull(
    topic: &str,
    queue_id: i32,
    offset: i64,
    max: i32,
    sys_flag: i32,
    sub: Option<&str>,
) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::PULL_MESSAGE, 0);
    let flag = sys_flag
        | if sub.is_some() {
            pull_sys_flag::FLAG_SUBSCRIPTION
        } else {
            0
        };
    for (k, v) in [
        ("consumerGroup", "cg".to_owned()),
        ("topic", topic.to_owned()),
        ("queueId", queue_id.to_string()),
        ("queueOffset", offset.to_string()),
        ("maxMsgNums", max.to_string()),
        ("sysFlag", flag.to_string()),
        ("commitOffset", "0".to_owned()),
        ("suspendTimeoutMillis", "60000".to_owned()),
        ("subVersion", "0".to_owned()),
        ("expressionType", "TAG".to_owned()),
    ] {
        r.ext_fields.insert(k.into(), v);
    }
    if let Some(s) = sub {
        r.ext_fields.insert("subscription".into(), s.into());
    }
    r
}

fn send_tagged(c: &mut RemotingClient, topic: &str, tag: &str, body: &[u8]) -> u64 {
    let props = format!("TAGS\u{1}{tag}\u{2}WAIT\u{1}true\u{2}");
    let r = c
        .invoke(
            crate::broker::processor::send::tests::send_v2(topic, 0, &props, body),
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_custom_header().unwrap();
    u64::from_str_radix(&h.msg_id[16..], 16).unwrap()
}

fn header(r: &RemotingCommand) -> PullMessageResponseHeader {
    r.decode_custom_header()
        .unwrap_or_else(|e| panic!("{e}: code {} {:?}", r.code, r.remark))
}

fn record_bytes(store: &MessageStore, offset: u64) -> Vec<u8> {
    store.record_at(offset).unwrap().0
}

fn broker_with(settings: BrokerSettings) -> Broker {
    start(
        BrokerControllerConfig {
            settings,
            ..BrokerControllerConfig::default()
        },
        0,
        None,
    )
}

#[test]
fn a_pull_answers_the_matching_records_raw_and_where_to_go_next() {
    let b = broker_with(BrokerSettings::default());
    let mut c = client(b.controller.local_addr());
    let at: Vec<u64> = ["a", "b", "a"]
        .iter()
        .map(|t| send_tagged(&mut c, "orders", t, t.as_bytes()))
        .collect();
    let r = c
        .invoke(pull("orders", 0, 0, 32, 0, Some("a")), TIMEOUT)
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let mut want = record_bytes(&b.store, at[0]);
    want.extend(record_bytes(&b.store, at[2]));
    assert_eq!(r.body, want, "the commit log's bytes, concatenated");
    let h = header(&r);
    assert_eq!(
        (
            h.next_begin_offset,
            h.min_offset,
            h.max_offset,
            h.suggest_which_broker_id
        ),
        (3, 0, 3, 0)
    );
    // RocketMQ 5's lite pull consumer: another code, the same request.
    let mut lite = pull("orders", 0, 0, 32, 0, Some("b"));
    lite.code = request_code::LITE_PULL_MESSAGE;
    let r = c.invoke(lite, TIMEOUT).unwrap();
    assert_eq!(r.body, record_bytes(&b.store, at[1]));
    // maxMsgNums bounds the batch; `*` takes every tag.
    let r = c
        .invoke(pull("orders", 0, 1, 1, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(r.body, record_bytes(&b.store, at[1]));
    assert_eq!(header(&r).next_begin_offset, 2);
}

/// A broker whose pulls carry at most `bytes` and `count` messages (in memory).
fn broker_within(bytes: usize, count: usize) -> Broker {
    broker_with(BrokerSettings {
        max_transfer_in_memory: TransferLimit { bytes, count },
        ..BrokerSettings::default()
    })
}

#[test]
fn the_brokers_transfer_limits_bound_a_pull_below_its_max_msg_nums() {
    let b = broker_within(256 * 1024, 3);
    let mut c = client(b.controller.local_addr());
    let at: Vec<u64> = (0..5)
        .map(|_| send_tagged(&mut c, "orders", "a", &[b'x'; 100]))
        .collect();
    let r = c
        .invoke(pull("orders", 0, 0, 32, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(
        header(&r).next_begin_offset,
        3,
        "maxTransferCountOnMessageInMemory"
    );
    // The byte limit: room for the first record and not the second.
    let one = record_bytes(&b.store, at[0]).len();
    let b = broker_within(one + 1, 32);
    let mut c = client(b.controller.local_addr());
    for _ in 0..5 {
        send_tagged(&mut c, "orders", "a", &[b'x'; 100]);
    }
    let r = c
        .invoke(pull("orders", 0, 0, 32, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(
        header(&r).next_begin_offset,
        1,
        "maxTransferBytesOnMessageInMemory"
    );
}

/// `MqClientApi::pull_range` of `[from, end)` on `broker`, asking `ask` a pull, 4 in flight:
/// the queue offsets of the records it got, where it stopped, and its refusal's code.
fn pull_range(broker: &Broker, from: i64, end: i64, ask: i32) -> (Vec<i64>, i64, Option<i32>) {
    let api = crate::client::MqClientApi::new(None, None).unwrap();
    let addr = broker.controller.local_addr().to_string();
    let header = PullMessageRequestHeader::tag(
        "cg".into(),
        "orders".into(),
        0,
        from,
        ask,
        pull_sys_flag::FLAG_SUBSCRIPTION,
        "*".into(),
    );
    let got = api
        .pull_range(&addr, &header, end, 4, 1_000, TIMEOUT)
        .unwrap();
    let offsets = got
        .bodies
        .iter()
        .flat_map(|b| crate::client::decode_pulled(b).unwrap())
        .map(|r| r.queue_offset)
        .collect();
    (offsets, got.next_offset, got.refused.map(|r| r.code))
}

#[test]
fn a_range_read_asks_again_for_what_the_brokers_limits_cut_short() {
    let b = broker_within(256 * 1024, 3);
    let mut c = client(b.controller.local_addr());
    for _ in 0..40 {
        send_tagged(&mut c, "orders", "a", b"x");
    }
    // Every offset once, in order, though each answer carries 3 of the 1024 asked.
    let (offsets, next, refused) = pull_range(&b, 2, 40, 1024);
    assert_eq!(offsets, (2..40).collect::<Vec<_>>());
    assert_eq!((next, refused), (40, None));
    // Past the queue's end: what exists, then the refusal where it stopped.
    let (offsets, next, refused) = pull_range(&b, 35, 50, 1024);
    assert_eq!(offsets, (35..40).collect::<Vec<_>>());
    assert_eq!((next, refused), (40, Some(response_code::PULL_NOT_FOUND)));
}

#[test]
fn store_statuses_map_onto_rocketmqs_pull_codes() {
    let b = broker_with(BrokerSettings::default());
    let mut c = client(b.controller.local_addr());
    c.invoke(create_topic("orders", 2), TIMEOUT).unwrap();
    for _ in 0..2 {
        send_tagged(&mut c, "orders", "a", b"x");
    }
    let code_next = |c: &mut RemotingClient, req| {
        let r = c.invoke(req, TIMEOUT).unwrap();
        (r.code, header(&r).next_begin_offset)
    };
    // OFFSET_OVERFLOW_ONE: caught up.
    assert_eq!(
        code_next(&mut c, pull("orders", 0, 2, 32, 0, Some("*"))),
        (response_code::PULL_NOT_FOUND, 2)
    );
    // OFFSET_OVERFLOW_BADLY: a master moves the consumer (to the min while it is 0).
    assert_eq!(
        code_next(&mut c, pull("orders", 0, 9, 32, 0, Some("*"))),
        (response_code::PULL_OFFSET_MOVED, 0)
    );
    // NO_MATCHED_LOGIC_QUEUE: an empty queue at 0 is not found; elsewhere the offset moves.
    assert_eq!(
        code_next(&mut c, pull("orders", 1, 0, 32, 0, Some("*"))),
        (response_code::PULL_NOT_FOUND, 0)
    );
    assert_eq!(
        code_next(&mut c, pull("orders", 1, 5, 32, 0, Some("*"))),
        (response_code::PULL_OFFSET_MOVED, 0)
    );
    // NO_MATCHED_MESSAGE: nothing takes the tag; the consumer retries past what it skipped.
    assert_eq!(
        code_next(&mut c, pull("orders", 0, 0, 32, 0, Some("zz"))),
        (response_code::PULL_RETRY_IMMEDIATELY, 2)
    );
}

#[test]
fn bad_pulls_are_refused_naming_the_field() {
    let b = broker_with(BrokerSettings {
        auto_create_subscription_group: false.into(),
        ..BrokerSettings::default()
    });
    let mut c = client(b.controller.local_addr());
    send_tagged(&mut c, "orders", "a", b"x");
    let refused = |c: &mut RemotingClient, req: RemotingCommand| {
        let r = c.invoke(req, TIMEOUT).unwrap();
        (r.code, r.remark.unwrap_or_default())
    };
    let (code, remark) = refused(&mut c, pull("orders", 0, 0, 32, 0, Some("*")));
    assert_eq!(code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert!(
        remark.contains("subscription group [cg]") && remark.contains("consumerGroup"),
        "{remark}"
    );

    let b = broker_with(BrokerSettings::default());
    let mut c = client(b.controller.local_addr());
    send_tagged(&mut c, "orders", "a", b"x");
    let (code, remark) = refused(&mut c, pull("nope", 0, 0, 32, 0, Some("*")));
    assert_eq!(code, response_code::TOPIC_NOT_EXIST);
    assert!(remark.contains("topic[nope]"), "{remark}");
    let (code, remark) = refused(&mut c, pull("orders", 99, 0, 32, 0, Some("*")));
    assert_eq!(code, response_code::SYSTEM_ERROR);
    assert!(remark.contains("queueId[99] is illegal"), "{remark}");
    let (code, remark) = refused(&mut c, pull("orders", 0, 0, 32, 0, Some("||")));
    assert_eq!(code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert!(remark.contains("(subscription)"), "{remark}");
    // No subscription in the pull and no heartbeat that registered one.
    let (code, remark) = refused(&mut c, pull("orders", 0, 0, 32, 0, None));
    assert_eq!(code, response_code::SUBSCRIPTION_NOT_EXIST);
    assert!(remark.contains("heartbeat"), "{remark}");
    let mut missing = pull("orders", 0, 0, 32, 0, Some("*"));
    missing.ext_fields.remove("queueOffset");
    let (code, remark) = refused(&mut c, missing);
    assert_eq!(code, response_code::SYSTEM_ERROR);
    assert!(remark.contains("`queueOffset` is missing"), "{remark}");
}

/// One key of GET_BROKER_RUNTIME_INFO's table.
fn runtime_info(c: &mut RemotingClient, key: &str) -> serde_json::Value {
    let info = c
        .invoke(
            RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO, 0),
            TIMEOUT,
        )
        .unwrap();
    let table: serde_json::Value = serde_json::from_slice(&info.body).unwrap();
    table["table"][key].clone()
}

fn held(c: &mut RemotingClient) -> Option<()> {
    (runtime_info(c, "pullRequestsHeld") == "1").then_some(())
}

fn not_held(c: &mut RemotingClient) -> Option<()> {
    held(c).is_none().then_some(())
}

#[test]
fn a_held_pull_is_answered_when_a_record_for_its_queue_arrives() {
    let b = broker_with(BrokerSettings::default());
    let addr = b.controller.local_addr();
    let mut c = client(addr);
    send_tagged(&mut c, "orders", "a", b"first");
    let waiting = std::thread::spawn(move || {
        let mut consumer = client(addr);
        // Held for up to 60 s: only the arrival can answer it within the client's timeout.
        consumer
            .invoke(
                pull("orders", 0, 1, 32, pull_sys_flag::FLAG_SUSPEND, Some("b")),
                TIMEOUT,
            )
            .unwrap()
    });
    wait_for("the pull to be held", || held(&mut c));
    // Another tag does not wake it; the record it takes does.
    send_tagged(&mut c, "orders", "a", b"not this");
    let at = send_tagged(&mut c, "orders", "b", b"this");
    let r = waiting.join().unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.body, record_bytes(&b.store, at));
    assert_eq!(header(&r).next_begin_offset, 3);
    wait_for("nothing held", || not_held(&mut c));
}

#[test]
fn a_held_pull_times_out_not_found_and_a_closed_one_is_dropped() {
    let b = broker_with(BrokerSettings::default());
    let addr = b.controller.local_addr();
    let mut c = client(addr);
    send_tagged(&mut c, "orders", "a", b"x");
    let mut short = pull("orders", 0, 1, 32, pull_sys_flag::FLAG_SUSPEND, Some("*"));
    short
        .ext_fields
        .insert("suspendTimeoutMillis".into(), "20".into());
    let r = c.invoke(short, TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::PULL_NOT_FOUND);
    assert_eq!(header(&r).next_begin_offset, 1);

    let mut gone = client(addr);
    // Oneway is not what a consumer sends, but it leaves the request held without a reader.
    gone.invoke_oneway(
        pull("orders", 0, 1, 32, pull_sys_flag::FLAG_SUSPEND, Some("*")),
        TIMEOUT,
    )
    .unwrap();
    wait_for("the pull to be held", || held(&mut c));
    drop(gone);
    wait_for("the closed connection's pull to be dropped", || {
        not_held(&mut c)
    });
}

#[test]
fn a_lagging_consumer_is_sent_to_the_slave_and_its_commit_is_stored() {
    // Ratio 0: every byte behind the head counts as lag beyond memory.
    let b = broker_with(BrokerSettings {
        slave_read_enable: true.into(),
        access_message_in_memory_max_ratio: 0,
        ..BrokerSettings::default()
    });
    let mut c = client(b.controller.local_addr());
    for _ in 0..3 {
        send_tagged(&mut c, "orders", "a", b"x");
    }
    let mut first = pull(
        "orders",
        0,
        0,
        1,
        pull_sys_flag::FLAG_COMMIT_OFFSET,
        Some("*"),
    );
    first.ext_fields.insert("commitOffset".into(), "2".into());
    let r = c.invoke(first, TIMEOUT).unwrap();
    assert_eq!(
        header(&r).suggest_which_broker_id,
        1,
        "whichBrokerWhenConsumeSlowly"
    );
    let mut q = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET, 0);
    for (k, v) in [
        ("consumerGroup", "cg"),
        ("topic", "orders"),
        ("queueId", "0"),
    ] {
        q.ext_fields.insert(k.into(), v.into());
    }
    let r = c.invoke(q, TIMEOUT).unwrap();
    assert_eq!(r.ext_fields.get("offset").map(String::as_str), Some("2"));

    // A consumer within the ratio stays on the group's broker, the master; without
    // slaveReadEnable a master never suggests a slave.
    for (slave_read_enable, ratio) in [(true, 40), (false, 0)] {
        let b = broker_with(BrokerSettings {
            slave_read_enable: slave_read_enable.into(),
            access_message_in_memory_max_ratio: ratio,
            ..BrokerSettings::default()
        });
        let mut c = client(b.controller.local_addr());
        for _ in 0..2 {
            send_tagged(&mut c, "orders", "a", b"x");
        }
        let r = c
            .invoke(pull("orders", 0, 0, 1, 0, Some("*")), TIMEOUT)
            .unwrap();
        assert_eq!(header(&r).suggest_which_broker_id, 0);
    }
}

/// A slave with slave id 1, replicating from `master` (an HA address) when given; its topics
/// are created on it directly, so only the pull path is under test.
fn slave_of(
    master: Option<String>,
    slave_read_enable: bool,
    enable_property_filter: bool,
) -> (BrokerController, Arc<HaClient>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let store = open_store(dir.path(), 0, listener.local_addr().unwrap().port());
    let ha = Arc::new(HaClient::start(store.clone(), master, HaConfig::default(), 1).unwrap());
    let settings = BrokerSettings {
        broker_id: 1,
        is_slave: true,
        slave_read_enable: slave_read_enable.into(),
        enable_property_filter,
        ..BrokerSettings::default()
    };
    let controller = BrokerController::start(
        listener,
        store,
        None,
        Some(ha.clone()),
        BrokerControllerConfig {
            settings,
            broker_role: "SLAVE".into(),
            slave_sync_interval: Duration::from_secs(3600),
            ..BrokerControllerConfig::default()
        },
    )
    .unwrap();
    (controller, ha, dir)
}

fn slave(slave_read_enable: bool) -> (BrokerController, tempfile::TempDir) {
    let (controller, _, dir) = slave_of(None, slave_read_enable, false);
    (controller, dir)
}

#[test]
fn a_pull_held_on_the_slave_is_answered_by_replication() {
    let (master, ha) = start_ha_master("");
    let mut m = client(master.controller.local_addr());
    m.invoke(create_topic("orders", 1), TIMEOUT).unwrap();
    send_tagged(&mut m, "orders", "a", b"before");
    let (s, _ha_client, _dir) = slave_of(Some(ha.local_addr().to_string()), true, false);
    let addr = s.local_addr();
    let mut c = client(addr);
    c.invoke(create_topic("orders", 1), TIMEOUT).unwrap();
    wait_for("the slave to catch up", || {
        let r = c
            .invoke(pull("orders", 0, 0, 32, 0, Some("*")), TIMEOUT)
            .ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    });
    let waiting = std::thread::spawn(move || {
        client(addr)
            .invoke(
                pull("orders", 0, 1, 32, pull_sys_flag::FLAG_SUSPEND, Some("*")),
                TIMEOUT,
            )
            .unwrap()
    });
    wait_for("the pull to be held on the slave", || held(&mut c));
    let at = send_tagged(&mut m, "orders", "a", b"after");
    let r = waiting.join().unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let record = master.store.record_at(at).unwrap().0;
    assert_eq!(r.body, record, "the replicated record, byte for byte");
}

#[test]
fn a_slave_serves_pulls_only_with_slave_read_enable_and_never_moves_offsets() {
    let (s, _dir) = slave(false);
    let mut c = client(s.local_addr());
    c.invoke(create_topic("orders", 1), TIMEOUT).unwrap();
    let r = c
        .invoke(pull("orders", 0, 0, 32, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(r.code, response_code::PULL_RETRY_IMMEDIATELY);
    assert_eq!(header(&r).suggest_which_broker_id, 0, "back to the master");

    let (s, _dir) = slave(true);
    let mut c = client(s.local_addr());
    c.invoke(create_topic("orders", 1), TIMEOUT).unwrap();
    let r = c
        .invoke(pull("orders", 0, 0, 32, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(r.code, response_code::PULL_NOT_FOUND);
    // An offset a master would move: the slave asks for a retry and keeps the offset.
    let r = c
        .invoke(pull("orders", 0, 7, 32, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(r.code, response_code::PULL_RETRY_IMMEDIATELY);
    assert_eq!(header(&r).next_begin_offset, 7);
}

#[test]
fn msg_get_total_counts_the_messages_answered_to_pulls_held_ones_too() {
    let b = broker_with(BrokerSettings::default());
    let addr = b.controller.local_addr();
    let mut c = client(addr);
    for t in ["a", "b", "a"] {
        send_tagged(&mut c, "orders", t, t.as_bytes());
    }
    let got = |c: &mut RemotingClient| runtime_info(c, "msgGetTotalTodayNow");
    assert_eq!(got(&mut c), "0");
    // Messages, not pulls: the two that matched the filter.
    let r = c
        .invoke(pull("orders", 0, 0, 32, 0, Some("a")), TIMEOUT)
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let mut lite = pull("orders", 0, 1, 1, 0, Some("*"));
    lite.code = request_code::LITE_PULL_MESSAGE;
    assert_eq!(
        c.invoke(lite, TIMEOUT).unwrap().code,
        response_code::SUCCESS
    );
    assert_eq!(got(&mut c), "3");
    // Answers without messages add nothing.
    for (offset, code) in [
        (3, response_code::PULL_NOT_FOUND),
        (99, response_code::PULL_OFFSET_MOVED),
    ] {
        let r = c
            .invoke(pull("orders", 0, offset, 32, 0, Some("*")), TIMEOUT)
            .unwrap();
        assert_eq!(r.code, code, "{:?}", r.remark);
    }
    assert_eq!(got(&mut c), "3");
    // A held pull counts when the arrival answers it.
    let waiting = std::thread::spawn(move || {
        client(addr)
            .invoke(
                pull("orders", 0, 3, 32, pull_sys_flag::FLAG_SUSPEND, Some("*")),
                TIMEOUT,
            )
            .unwrap()
    });
    wait_for("the pull to be held", || held(&mut c));
    send_tagged(&mut c, "orders", "c", b"wakes it");
    let r = waiting.join().unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(got(&mut c), "4");
}

fn send_with(c: &mut RemotingClient, topic: &str, props: &[(&str, &str)]) -> u64 {
    let mut encoded = String::new();
    for (k, v) in props.iter().chain(&[("WAIT", "true")]) {
        encoded.push_str(&format!("{k}\u{1}{v}\u{2}"));
    }
    let send = crate::broker::processor::send::tests::send_v2(topic, 0, &encoded, b"m");
    let r = c.invoke(send, TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_custom_header().unwrap();
    u64::from_str_radix(&h.msg_id[16..], 16).unwrap()
}

fn sql_pull(offset: i64, sys_flag: i32, sql: &str) -> RemotingCommand {
    let mut r = pull("orders", 0, offset, 32, sys_flag, Some(sql));
    r.ext_fields.insert("expressionType".into(), "SQL92".into());
    r
}

fn sql_broker(enable_property_filter: bool) -> Broker {
    broker_with(BrokerSettings {
        enable_property_filter,
        ..BrokerSettings::default()
    })
}

#[test]
fn a_sql92_pull_answers_the_records_whose_properties_match() {
    let b = sql_broker(true);
    let mut c = client(b.controller.local_addr());
    let at: Vec<u64> = ["7", "3", "x", "9"]
        .iter()
        .map(|a| send_with(&mut c, "orders", &[("a", a)]))
        .collect();
    let tagged = send_with(&mut c, "orders", &[("TAGS", "t")]);
    let r = c.invoke(sql_pull(0, 0, "a > 5"), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let mut want = record_bytes(&b.store, at[0]);
    want.extend(record_bytes(&b.store, at[3]));
    assert_eq!(
        r.body, want,
        "7 and 9; not 3, nor x, nor the message without a"
    );
    assert_eq!(header(&r).next_begin_offset, 5);
    // TAGS is a property; a missing one IS NULL.
    let r = c
        .invoke(sql_pull(0, 0, "TAGS = 't' AND a IS NULL"), TIMEOUT)
        .unwrap();
    assert_eq!(r.body, record_bytes(&b.store, tagged));
    // Nothing matching: the consumer is told to pull again from past what was looked at.
    let r = c.invoke(sql_pull(0, 0, "a = 'nope'"), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::PULL_RETRY_IMMEDIATELY);
    assert_eq!(header(&r).next_begin_offset, 5);
    let r = c.invoke(sql_pull(0, 0, "a >"), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert!(r.remark.unwrap().contains("SQL92 expression"));
}

#[test]
fn sql92_is_refused_without_enable_property_filter_and_checked_by_check_client_config() {
    let check = |c: &mut RemotingClient, kind: &str, sql: &str| {
        let mut r = RemotingCommand::request(request_code::CHECK_CLIENT_CONFIG, 0);
        r.body = serde_json::json!({"clientId": "c1", "group": "cg", "subscriptionData": {
            "topic": "orders", "subString": sql, "expressionType": kind, "subVersion": 1}})
        .to_string()
        .into_bytes();
        let r = c.invoke(r, TIMEOUT).unwrap();
        (r.code, r.remark.unwrap_or_default())
    };
    let off = sql_broker(false);
    let mut c = client(off.controller.local_addr());
    send_with(&mut c, "orders", &[("a", "7")]);
    let r = c.invoke(sql_pull(0, 0, "a > 5"), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    let remark = r.remark.unwrap();
    assert!(remark.contains("does not support consumer to filter message by SQL92"));
    assert_eq!(
        check(&mut c, "TAG", "a || b"),
        (response_code::SUCCESS, String::new())
    );
    let (code, why) = check(&mut c, "SQL92", "a > 5");
    assert_eq!(code, response_code::SYSTEM_ERROR);
    assert!(why.contains("enablePropertyFilter is false"), "{why}");

    let on = sql_broker(true);
    let mut c = client(on.controller.local_addr());
    assert_eq!(
        check(&mut c, "SQL92", "a > 5"),
        (response_code::SUCCESS, String::new())
    );
    let (code, why) = check(&mut c, "SQL92", "a > 'x'");
    assert_eq!(code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert!(why.contains("cannot be compared"), "{why}");
    let (code, why) = check(&mut c, "CLASS", "x");
    assert_eq!(code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert!(why.contains("unknown expression type"), "{why}");
}

#[test]
fn a_held_sql92_pull_wakes_only_for_a_matching_message() {
    let b = sql_broker(true);
    let addr = b.controller.local_addr();
    let mut c = client(addr);
    send_with(&mut c, "orders", &[("a", "9")]);
    let waiting = std::thread::spawn(move || {
        let mut consumer = client(addr);
        consumer
            .invoke(sql_pull(1, pull_sys_flag::FLAG_SUSPEND, "a > 5"), TIMEOUT)
            .unwrap()
    });
    wait_for("the pull to be held", || held(&mut c));
    send_with(&mut c, "orders", &[("a", "1")]);
    send_with(&mut c, "orders", &[("b", "9")]);
    // Still held after two messages that do not match: they arrived before the next send
    // answered, and arrivals are handled as they are dispatched.
    assert_eq!(runtime_info(&mut c, "pullRequestsHeld"), "1");
    let at = send_with(&mut c, "orders", &[("a", "6")]);
    let r = waiting.join().unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(r.body, record_bytes(&b.store, at));
    assert_eq!(header(&r).next_begin_offset, 4);
}

#[test]
fn a_sql92_pull_held_on_the_slave_wakes_for_a_replicated_match_only() {
    let (master, ha) = start_ha_master("");
    let mut m = client(master.controller.local_addr());
    m.invoke(create_topic("orders", 1), TIMEOUT).unwrap();
    send_with(&mut m, "orders", &[("a", "9")]);
    let (s, _ha_client, _dir) = slave_of(Some(ha.local_addr().to_string()), true, true);
    let addr = s.local_addr();
    let mut c = client(addr);
    c.invoke(create_topic("orders", 1), TIMEOUT).unwrap();
    wait_for("the slave to catch up", || {
        let r = c.invoke(sql_pull(0, 0, "a > 5"), TIMEOUT).ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    });
    let waiting = std::thread::spawn(move || {
        let sql = sql_pull(1, pull_sys_flag::FLAG_SUSPEND, "a > 5");
        client(addr).invoke(sql, TIMEOUT).unwrap()
    });
    wait_for("the pull to be held on the slave", || held(&mut c));
    send_with(&mut m, "orders", &[("a", "1")]);
    let at = send_with(&mut m, "orders", &[("a", "6")]);
    let r = waiting.join().unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let record = master.store.record_at(at).unwrap().0;
    assert_eq!(r.body, record, "only the replicated match");
    assert_eq!(header(&r).next_begin_offset, 3);
}
