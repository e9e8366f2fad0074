//! Sends as a Java producer writes them, field by field from RocketMQ's definitions
//! (`SendMessageRequestHeaderV2`'s letters, `MessageDecoder.encodeMessage`), not by our encoder.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::broker::subscription_group::SubscriptionGroupManager;
use crate::remoting::header::SendMessageResponseHeader;
use crate::store::StoreConfig;

const PRODUCER: &str = "10.1.2.3:40000";
const LONG: Duration = Duration::from_secs(60);

pub(super) fn broker(
    dir: &std::path::Path,
    settings: BrokerSettings,
    slaves: usize,
) -> SendMessageProcessor {
    let mut config = StoreConfig::new(dir);
    config.mapped_file_size = 64 * 1024;
    config.sync_slaves = slaves;
    config.slave_timeout = Duration::from_millis(if slaves > 0 { 60_000 } else { 3000 });
    let store = Arc::new(MessageStore::open(config).unwrap());
    let topics = Arc::new(TopicConfigManager::load(dir, &settings).unwrap());
    let settings = Arc::new(settings);
    let groups = Arc::new(SubscriptionGroupManager::load(dir, settings.clone()).unwrap());
    let transactions = Arc::new(crate::broker::transaction::tests::service(
        &store, &settings,
    ));
    SendMessageProcessor::new(
        store,
        topics,
        groups,
        settings,
        transactions,
        Arc::default(),
        Arc::new(crate::broker::register_service::RegisterService::new()),
    )
}

/// SEND_MESSAGE_V2 as `SendMessageRequestHeaderV2` names its fields `a`..`n`.
pub(crate) fn send_v2(
    topic: &str,
    queue_id: i32,
    properties: &str,
    body: &[u8],
) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::SEND_MESSAGE_V2, 7);
    for (k, v) in [
        ("a", "producer-group"),
        ("b", topic),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", &queue_id.to_string()),
        ("f", "0"),
        ("g", "1700000000000"),
        ("h", "0"),
        ("i", properties),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
    ] {
        request.ext_fields.insert(k.into(), v.into());
    }
    request.body = body.to_vec();
    request
}

fn process(
    p: &SendMessageProcessor,
    request: &RemotingCommand,
) -> (Option<RemotingCommand>, mpsc::Receiver<RemotingCommand>) {
    let (tx, rx) = mpsc::channel();
    let now = p.send_message(request, PRODUCER.parse().unwrap(), move |r| {
        let _ = tx.send(r);
    });
    (now, rx)
}

#[test]
fn a_send_is_stored_and_answered_as_java_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path(), BrokerSettings::default(), 0);
    let request = send_v2("orders", 2, "TAGS\u{1}new\u{2}WAIT\u{1}true\u{2}", b"hello");
    let (now, _) = process(&p, &request);
    let response = now.expect("an ASYNC_MASTER answers at once");
    assert_eq!(
        (response.code, response.opaque),
        (response_code::SUCCESS, 7)
    );
    assert!(response.is_response());
    let header: SendMessageResponseHeader = response.decode_custom_header().unwrap();
    assert_eq!(header.queue_id, 2);
    assert_eq!(header.queue_offset, 0);
    assert_eq!(header.msg_id, record::msg_id(&p.store.store_host(), 0));
    assert_eq!(response.ext_fields["MSG_REGION"], "DefaultRegion");

    let stored = p.store.get_messages("orders", 2, 0, 10).unwrap();
    let view = stored[0].1.view();
    assert_eq!(view.body, b"hello");
    assert_eq!(view.born_host, PRODUCER.parse().unwrap());
    assert_eq!(view.born_timestamp, 1_700_000_000_000);
    assert_eq!(
        view.properties, b"TAGS\x01new\x02CLUSTER\x01DefaultCluster\x02",
        "WAIT is not stored, the cluster is"
    );
    assert_eq!(
        p.topics.select("orders").unwrap().write_queue_nums,
        4,
        "created from TBW102 with the producer's queue count"
    );
}

/// `MessageDecoder.encodeMessages` of `(body, properties)`, message i with flag i.
fn batch_body(messages: &[(&str, &str)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (msg_body, props)) in messages.iter().enumerate() {
        let total = 4 + 4 + 4 + 4 + 4 + msg_body.len() + 2 + props.len();
        body.extend_from_slice(&(total as i32).to_be_bytes());
        body.extend_from_slice(&0i32.to_be_bytes()); // magic
        body.extend_from_slice(&0i32.to_be_bytes()); // body CRC
        body.extend_from_slice(&(i as i32).to_be_bytes()); // flag
        body.extend_from_slice(&(msg_body.len() as i32).to_be_bytes());
        body.extend_from_slice(msg_body.as_bytes());
        body.extend_from_slice(&(props.len() as i16).to_be_bytes());
        body.extend_from_slice(props.as_bytes());
    }
    body
}

#[test]
fn a_batch_stores_every_message_with_the_batch_properties() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path(), BrokerSettings::default(), 0);
    let body = batch_body(&[("m0", "KEYS\u{1}k0\u{2}"), ("m1", "")]);
    let mut request = send_v2("batch", 0, "", &body);
    request.code = request_code::SEND_BATCH_MESSAGE;
    let response = process(&p, &request).0.unwrap();
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
    let header: SendMessageResponseHeader = response.decode_custom_header().unwrap();
    assert_eq!(header.msg_id.split(',').count(), 2);
    let stored = p.store.get_messages("batch", 0, 0, 10).unwrap();
    let views: Vec<_> = stored.iter().map(|(_, r)| r.view()).collect();
    assert_eq!((views[0].body, views[1].body), (&b"m0"[..], &b"m1"[..]));
    assert_eq!(views[1].flag, 1);
    assert_eq!(
        views[0].properties,
        b"KEYS\x01k0\x02CLUSTER\x01DefaultCluster\x02"
    );
    assert_eq!(views[1].properties, b"CLUSTER\x01DefaultCluster\x02");
}

#[test]
fn refused_sends_name_the_problem_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let strict = BrokerSettings {
        auto_create_topic: false.into(),
        max_message_size: 16.into(),
        ..BrokerSettings::default()
    };
    let p = broker(dir.path(), strict, 0);
    p.topics
        .update_or_create(
            TopicConfig {
                topic_name: "known".into(),
                write_queue_nums: 2,
                read_queue_nums: 2,
                ..TopicConfig::default()
            },
            &[],
        )
        .unwrap();
    let cases = [
        (
            send_v2("unknown", 0, "", b"x"),
            response_code::TOPIC_NOT_EXIST,
            "topic[unknown] not exist",
        ),
        (
            send_v2("known", 9, "", b"x"),
            response_code::SYSTEM_ERROR,
            "queueId[9] is illegal",
        ),
        (
            send_v2("known", 0, "", &[0; 17]),
            response_code::MESSAGE_ILLEGAL,
            "MAX: 16",
        ),
        (
            {
                let mut r = send_v2("known", 0, "", b"x");
                r.ext_fields.remove("e");
                r
            },
            response_code::SYSTEM_ERROR,
            "`e`",
        ),
        (
            {
                let mut r = send_v2("known", 0, "", &[0, 0, 0, 99, 1]);
                r.code = request_code::SEND_BATCH_MESSAGE;
                r
            },
            response_code::MESSAGE_ILLEGAL,
            "does not fit",
        ),
        (
            send_v2("known", 0, "TAGS\u{1}a\u{2}DELAY\u{1}soon\u{2}", b"x"),
            response_code::MESSAGE_ILLEGAL,
            "DELAY=\"soon\" is not a delay level",
        ),
        (
            send_v2("known", 0, "TIMER_DELAY_SEC\u{1}-5\u{2}", b"x"),
            response_code::MESSAGE_ILLEGAL,
            "TIMER_DELAY_SEC=-5 is negative",
        ),
        (
            send_v2("known", 0, "TIMER_DELAY_SEC\u{1}999999999\u{2}", b"x"),
            response_code::MESSAGE_ILLEGAL,
            "the max delay 259200000ms (timerMaxDelaySec=259200)",
        ),
        (
            send_v2(
                "known",
                0,
                "TRAN_MSG\u{1}true\u{2}TIMER_DELAY_SEC\u{1}5\u{2}",
                b"x",
            ),
            response_code::MESSAGE_ILLEGAL,
            "a transactional message cannot be delayed",
        ),
        (
            send_v2("rmq_sys_wheel_timer", 0, "", b"x"),
            response_code::NO_PERMISSION,
            "Sending message to topic[rmq_sys_wheel_timer] is forbidden.",
        ),
        (
            send_v2("SCHEDULE_TOPIC_XXXX", 0, "", b"x"),
            response_code::NO_PERMISSION,
            "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.",
        ),
        (
            {
                let mut r = send_v2("known", 0, "", &batch_body(&[("m", "DELAY\u{1}1\u{2}")]));
                r.code = request_code::SEND_BATCH_MESSAGE;
                r
            },
            response_code::MESSAGE_ILLEGAL,
            "a batch cannot hold delayed messages",
        ),
    ];
    for (request, code, remark) in cases {
        let response = process(&p, &request).0.unwrap();
        assert_eq!(response.code, code, "{:?}", response.remark);
        let text = response.remark.unwrap_or_default();
        assert!(text.contains(remark), "{text:?} should say {remark:?}");
    }
    assert_eq!(p.store.max_offset(), 0, "nothing written");
    // A level of 0 asks for no delay (RocketMQ stores such a message at once).
    let undelayed = send_v2("known", 0, "DELAY\u{1}0\u{2}", b"x");
    assert_eq!(
        process(&p, &undelayed).0.unwrap().code,
        response_code::SUCCESS
    );

    let slave = broker(
        tempfile::tempdir().unwrap().path(),
        BrokerSettings {
            is_slave: true,
            ..BrokerSettings::default()
        },
        0,
    );
    let response = process(&slave, &send_v2("t", 0, "", b"x")).0.unwrap();
    assert_eq!(response.code, response_code::SERVICE_NOT_AVAILABLE);
    assert!(response.remark.unwrap().contains("SLAVE"));
}

#[test]
fn a_sync_master_answers_when_the_slave_ack_covers_the_send() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path(), BrokerSettings::default(), 1);
    let gt = p.store.group_transfer().unwrap().clone();

    let (now, rx) = process(&p, &send_v2("t", 0, "", b"x"));
    assert!(now.is_none());
    assert_eq!(
        rx.recv_timeout(LONG).unwrap().code,
        response_code::SLAVE_NOT_AVAILABLE,
        "no slave: answered at once, the message stays stored"
    );

    gt.on_acks(vec![p.store.max_offset()]);
    let (now, rx) = process(&p, &send_v2("t", 0, "", b"y"));
    assert!(now.is_none());
    assert!(rx.try_recv().is_err(), "waits for the ack");
    gt.on_acks(vec![p.store.max_offset()]);
    assert_eq!(rx.recv_timeout(LONG).unwrap().code, response_code::SUCCESS);

    let (now, _) = process(&p, &send_v2("t", 0, "WAIT\u{1}false\u{2}", b"z"));
    assert_eq!(
        now.unwrap().code,
        response_code::SUCCESS,
        "WAIT=false does not wait"
    );
}

#[test]
fn a_controller_mode_master_below_min_in_sync_replicas_refuses_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path(), BrokerSettings::default(), 1);
    let gt = p.store.group_transfer().unwrap().clone();
    let mut policy = gt.policy();
    // Alone in its SyncStateSet, minInSyncReplicas=2.
    (policy.in_sync_replicas, policy.min_in_sync_replicas) = (Some(1), 2);
    gt.set_policy(policy.clone());
    for props in ["", "WAIT\u{1}true\u{2}"] {
        let response = process(&p, &send_v2("t", 0, props, b"x")).0.unwrap();
        assert_eq!(
            response.code,
            response_code::SYSTEM_ERROR,
            "RocketMQ's code for it"
        );
        let remark = response.remark.unwrap();
        assert!(
            remark.starts_with("in-sync replicas not enough"),
            "{remark}"
        );
        assert!(remark.contains("minInSyncReplicas is 2"), "{remark}");
    }
    assert_eq!(p.store.max_offset(), 0, "nothing written");
    // WAIT=false is not RocketMQ's `needHandleHA` put: stored, answered at once.
    let (now, _) = process(&p, &send_v2("t", 0, "WAIT\u{1}false\u{2}", b"z"));
    assert_eq!(now.unwrap().code, response_code::SUCCESS);
    // A second member: the put is taken, and waits for the slave, never SLAVE_NOT_AVAILABLE.
    policy.in_sync_replicas = Some(2);
    gt.set_policy(policy);
    let (now, rx) = process(&p, &send_v2("t", 0, "", b"y"));
    assert!(now.is_none());
    assert!(rx.try_recv().is_err(), "waits for the ack");
    gt.on_acks(vec![p.store.max_offset()]);
    assert_eq!(rx.recv_timeout(LONG).unwrap().code, response_code::SUCCESS);
}

#[test]
fn a_send_to_a_full_disk_is_answered_service_not_available_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path(), BrokerSettings::default(), 0);
    p.store.set_fake_disk_used_ratio(Some(0.95)).unwrap();
    p.store.clean_now().unwrap();
    let response = process(&p, &send_v2("t", 0, "", b"x")).0.unwrap();
    assert_eq!(response.code, response_code::SERVICE_NOT_AVAILABLE);
    let remark = response.remark.unwrap();
    assert!(remark.contains("diskSpaceWarningLevelRatio"), "{remark}");
    assert_eq!(p.store.max_offset(), 0, "nothing written");
    p.store.set_fake_disk_used_ratio(Some(0.5)).unwrap();
    p.store.clean_now().unwrap();
    let response = process(&p, &send_v2("t", 0, "", b"x")).0.unwrap();
    assert_eq!(response.code, response_code::SUCCESS);
}

#[test]
fn a_delayed_send_waits_in_the_schedule_topic_and_a_level_beats_timer_properties() {
    let dir = tempfile::tempdir().unwrap();
    let p = broker(dir.path(), BrokerSettings::default(), 0);
    let request = send_v2(
        "orders",
        1,
        "TAGS\u{1}a\u{2}DELAY\u{1}2\u{2}TIMER_DELIVER_MS\u{1}1\u{2}",
        b"later",
    );
    let response = process(&p, &request).0.unwrap();
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
    assert!(
        p.store.consume_queue("orders", 1).is_none(),
        "not delivered yet"
    );
    let stored = p
        .store
        .get_messages(record::SCHEDULE_TOPIC, 1, 0, 1)
        .unwrap();
    let props = record::decode_properties(stored[0].1.view().properties);
    let has = |k: &str, v: &str| props.contains(&(k.to_owned(), v.to_owned()));
    assert!(has("REAL_TOPIC", "orders") && has("REAL_QID", "1") && has("DELAY", "2"));
    assert!(
        !props.iter().any(|(k, _)| k == "TIMER_DELIVER_MS"),
        "{props:?}"
    );
}
