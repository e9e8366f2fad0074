use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::commitlog::record::{decode_properties, encode_properties};
use crate::commitlog::AppendResult;
use crate::store::MessageStore;
use crate::store::StoreConfig;

const LONG: Duration = Duration::from_secs(30);

fn open(dir: &Path, levels: &[i64]) -> Arc<MessageStore> {
    let mut config = StoreConfig::new(dir);
    config.mapped_file_size = 1024 * 1024;
    config.message_delay_level = levels.to_vec();
    Arc::new(MessageStore::open(config).unwrap())
}

fn put(store: &MessageStore, topic: &str, queue_id: i32, props: &[(&str, &str)]) -> AppendResult {
    let properties = encode_properties(props.iter().copied()).unwrap();
    store
        .put(&MessageDraft {
            topic,
            body: b"body",
            properties: &properties,
            queue_id,
            flag: 3,
            sys_flag: 0,
            born_timestamp: 42,
            born_host: SocketAddr::from(([10, 0, 0, 1], 5)),
            reconsume_times: 2,
            prepared_tx_offset: 0,
        })
        .unwrap()
}

fn props_of(store: &MessageStore, topic: &str, queue_id: i32, at: i64) -> Vec<(String, String)> {
    let (_, record) = store
        .get_messages(topic, queue_id, at, 1)
        .unwrap()
        .remove(0);
    decode_properties(record.view().properties)
}

/// Waits (bounded, so a hang fails) until `topic` queue `queue_id` holds `n` messages.
fn wait_for(store: &MessageStore, topic: &str, queue_id: i32, n: i64) {
    let deadline = Instant::now() + LONG;
    while store
        .consume_queue(topic, queue_id)
        .map_or(0, |cq| cq.max_queue_offset())
        < n
    {
        assert!(
            Instant::now() < deadline,
            "{topic}/{queue_id}: not {n} messages"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn message_delay_level_parses_as_rocketmq_and_renders_back() {
    let default = parse_message_delay_level(DEFAULT_MESSAGE_DELAY_LEVEL).unwrap();
    assert_eq!(default.len(), 18);
    assert_eq!(
        (default[0], default[4], default[17]),
        (1_000, 60_000, 7_200_000)
    );
    assert_eq!(
        render_message_delay_level(&default),
        DEFAULT_MESSAGE_DELAY_LEVEL
    );
    assert_eq!(
        parse_message_delay_level("1s  1s 2s\n1d").unwrap(),
        [1_000, 1_000, 2_000, 86_400_000]
    );
    for bad in ["", "5", "5x", "s", "-1s", "1.5s", "1ms"] {
        let err = parse_message_delay_level(bad).unwrap_err();
        assert!(err.contains("level"), "{bad:?}: {err}");
    }
}

#[test]
fn a_delayed_put_waits_in_its_levels_queue_with_its_real_topic() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &[1_000, 5_000, 10_000]);
    let r = put(&store, "orders", 3, &[("DELAY", "2"), ("TAGS", "t")]);
    assert!(
        store.consume_queue("orders", 3).is_none(),
        "not in its topic yet"
    );
    let cq = store
        .consume_queue(SCHEDULE_TOPIC, 1)
        .expect("level 2 is queue 1");
    let entry = cq.get(0, 1)[0].1;
    assert_eq!(
        entry.tags_code,
        r.store_timestamp + 5_000,
        "tag code = delivery time"
    );
    let props = props_of(&store, SCHEDULE_TOPIC, 1, 0);
    for (k, v) in [
        ("REAL_TOPIC", "orders"),
        ("REAL_QID", "3"),
        ("DELAY", "2"),
        ("TAGS", "t"),
    ] {
        assert!(
            props.contains(&(k.into(), v.into())),
            "{k}={v} in {props:?}"
        );
    }
    // Past the last level: the last, as RocketMQ clamps it.
    put(&store, "orders", 0, &[("DELAY", "99")]);
    assert!(props_of(&store, SCHEDULE_TOPIC, 2, 0).contains(&("DELAY".into(), "3".into())));
    // 0 or negative: no delay.
    put(&store, "orders", 0, &[("DELAY", "0")]);
    put(&store, "orders", 0, &[("DELAY", "-1")]);
    assert_eq!(
        store.consume_queue("orders", 0).unwrap().max_queue_offset(),
        2
    );
}

#[test]
fn bad_delays_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &[1_000]);
    let max = store.max_offset();
    let properties = encode_properties([("DELAY", "soon")]).unwrap();
    let draft = MessageDraft {
        topic: "orders",
        body: b"x",
        properties: &properties,
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: SocketAddr::from(([127, 0, 0, 1], 1)),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    };
    let err = store.put(&draft).unwrap_err().to_string();
    assert!(err.contains("DELAY=\"soon\""), "{err}");
    let delayed = encode_properties([("DELAY", "1")]).unwrap();
    let batch = [
        draft,
        MessageDraft {
            properties: &delayed,
            ..draft
        },
    ];
    let err = store.put_batch(&batch[1..]).unwrap_err().to_string();
    assert!(
        err.contains("a batch cannot hold delayed messages"),
        "{err}"
    );
    let bad_topic = MessageDraft {
        topic: "a b",
        properties: &delayed,
        ..draft
    };
    assert!(
        store.put(&bad_topic).is_err(),
        "checked before it hides in REAL_TOPIC"
    );
    assert_eq!(store.max_offset(), max);
}

#[test]
fn due_messages_go_back_to_their_topic_not_before_time_and_progress_persists() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &[200, 400]);
    store.start_schedule().unwrap();
    let first = put(
        &store,
        "orders",
        1,
        &[("DELAY", "2"), ("TAGS", "t"), ("k", "v")],
    );
    let second = put(&store, "orders", 1, &[("DELAY", "1")]);
    wait_for(&store, "orders", 1, 2);
    let delivered = store.get_messages("orders", 1, 0, 2).unwrap();
    // Level 1 is due first although it was put second.
    let (soon, late) = (delivered[0].1.view(), delivered[1].1.view());
    assert!(soon.store_timestamp >= second.store_timestamp + 200);
    assert!(late.store_timestamp >= first.store_timestamp + 400);
    let props = decode_properties(late.properties);
    // As RocketMQ's: the level stays in the delivered message, and is not read again.
    assert!(props.contains(&("DELAY".into(), "2".into())), "{props:?}");
    assert_eq!(store.get_messages("orders", 1, 0, 8).unwrap().len(), 2);
    assert!(props.contains(&("REAL_TOPIC".into(), "orders".into())));
    assert!(props.contains(&("k".into(), "v".into())));
    assert_eq!(
        (
            late.body,
            late.flag,
            late.reconsume_times,
            late.born_timestamp
        ),
        (&b"body"[..], 3, 2, 42)
    );
    assert_eq!(
        store.consume_queue("orders", 1).unwrap().get(1, 1)[0]
            .1
            .tags_code,
        record::tags_hash_code("t"),
        "an ordinary tag code again"
    );
    store.close().unwrap();
    let file = std::fs::read_to_string(dir.path().join("config/delayOffset.json")).unwrap();
    let offsets: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(offsets["offsetTable"], serde_json::json!({"1": 1, "2": 1}));
    drop(store);

    let again = open(dir.path(), &[200, 400]);
    assert_eq!(again.schedule().offsets(), BTreeMap::from([(1, 1), (2, 1)]));
    again.start_schedule().unwrap();
    put(&again, "orders", 1, &[("DELAY", "1")]);
    wait_for(&again, "orders", 1, 3);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        again.consume_queue("orders", 1).unwrap().max_queue_offset(),
        3,
        "no repeat"
    );
}

#[test]
fn a_store_resumes_from_its_persisted_offsets_and_a_slave_takes_its_masters() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path(), &[100]);
        for _ in 0..3 {
            put(&store, "orders", 0, &[("DELAY", "1")]);
        }
        // As a slave's sync writes them: the master delivered the first two (fastjson's keys).
        store
            .schedule()
            .replace(br#"{"offsetTable":{1:2},"dataVersion":{}}"#)
            .unwrap();
        store.close().unwrap();
    }
    let store = open(dir.path(), &[100]);
    store.start_schedule().unwrap();
    wait_for(&store, "orders", 0, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        store.consume_queue("orders", 0).unwrap().max_queue_offset(),
        1,
        "only the third"
    );
    assert!(store.schedule().replace(b"{nope").is_err());
}

#[test]
fn a_corrupt_offsets_file_fails_the_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/delayOffset.json"),
        b"{\"offsetTable\":[",
    )
    .unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.mapped_file_size = 1024 * 1024;
    let err = MessageStore::open(config).err().unwrap().to_string();
    assert!(err.contains("delayOffset.json"), "{err}");
}

#[test]
fn a_sleeping_service_is_woken_by_a_put_due_sooner() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &[3_600_000, 100]);
    store.start_schedule().unwrap();
    put(&store, "orders", 0, &[("DELAY", "1")]);
    // The thread now sleeps for an hour; level 2 is due in 100 ms, and delivered within the
    // bounded wait only if the put woke it.
    std::thread::sleep(Duration::from_millis(50));
    put(&store, "orders", 1, &[("DELAY", "2")]);
    wait_for(&store, "orders", 1, 1);
    assert!(store.consume_queue("orders", 0).is_none());
}

#[test]
fn a_store_promoted_again_delivers_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &[1_000]);
    // Master, demoted (controller mode), then promoted again: each promotion starts delivery.
    store.start_schedule().unwrap();
    put(&store, "orders", 0, &[("DELAY", "1")]);
    wait_for(&store, "orders", 0, 1);
    store.shutdown_schedule();
    put(&store, "orders", 0, &[("DELAY", "1")]);
    store.start_schedule().unwrap();
    store.start_schedule().unwrap();
    wait_for(&store, "orders", 0, 2);
    store.shutdown_schedule();
    store.shutdown_schedule();
}
