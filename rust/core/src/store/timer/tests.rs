use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::commitlog::record::{decode_properties, encode_properties};
use crate::store::{MessageStore, StoreConfig};

const LONG: Duration = Duration::from_secs(30);

fn config(dir: &Path, precision_ms: i64) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.mapped_file_size = 1024 * 1024;
    config.timer.precision_ms = precision_ms;
    config.timer.log_file_size = 4096;
    config.timer.flush_interval = Duration::from_millis(50);
    config
}

fn open(dir: &Path, precision_ms: i64) -> Arc<MessageStore> {
    Arc::new(MessageStore::open(config(dir, precision_ms)).unwrap())
}

fn put(
    store: &MessageStore,
    topic: &str,
    props: &[(&str, &str)],
) -> Result<crate::commitlog::AppendResult, CommitLogError> {
    let properties = encode_properties(props.iter().copied()).unwrap();
    store.put(&MessageDraft {
        topic,
        body: b"body",
        properties: &properties,
        queue_id: 2,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 42,
        born_host: SocketAddr::from(([10, 0, 0, 1], 5)),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    })
}

fn count(store: &MessageStore, topic: &str, queue_id: i32) -> i64 {
    MessageStore::consume_queue(store, topic, queue_id).map_or(0, |cq| cq.max_queue_offset())
}

/// Waits (bounded, so a hang fails) until `topic` queue 2 holds `n` messages; when the last
/// arrived.
fn wait_for(store: &MessageStore, topic: &str, n: i64) -> i64 {
    let deadline = Instant::now() + LONG;
    while count(store, topic, 2) < n {
        assert!(Instant::now() < deadline, "{topic}: not {n} messages");
        std::thread::sleep(Duration::from_millis(1));
    }
    now_millis()
}

fn props(store: &MessageStore, topic: &str, queue_id: i32, at: i64) -> Vec<(String, String)> {
    let (_, record) = store
        .get_messages(topic, queue_id, at, 1)
        .unwrap()
        .remove(0);
    decode_properties(record.view().properties)
}

fn prop(props: &[(String, String)], name: &str) -> Option<String> {
    props
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

#[test]
fn a_timer_message_waits_in_the_timer_topic_then_reaches_its_queue_at_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    store.start_timer(true).unwrap();
    let deliver_at = now_millis() + 700;
    let at = deliver_at.to_string();
    put(
        &store,
        "orders",
        &[("TIMER_DELIVER_MS", &at), ("UNIQ_KEY", "K1")],
    )
    .unwrap();
    assert_eq!(count(&store, "orders", 2), 0, "not in its topic yet");
    let parked = props(&store, TIMER_TOPIC, 0, 0);
    assert_eq!(prop(&parked, "REAL_TOPIC").as_deref(), Some("orders"));
    assert_eq!(prop(&parked, "REAL_QID").as_deref(), Some("2"));
    // RocketMQ's rounding: the slot's start (one slot less when the time is a slot's start).
    let out = if deliver_at % 100 == 0 {
        deliver_at - 100
    } else {
        deliver_at / 100 * 100
    };
    assert_eq!(prop(&parked, "TIMER_OUT_MS"), Some(out.to_string()));

    let arrived = wait_for(&store, "orders", 1);
    assert!(
        arrived >= deliver_at,
        "delivered {} ms early",
        deliver_at - arrived
    );
    let delivered = props(&store, "orders", 2, 0);
    assert_eq!(prop(&delivered, "REAL_TOPIC"), None);
    assert_eq!(prop(&delivered, "TIMER_DELIVER_MS"), Some(at));
    assert_eq!(prop(&delivered, "UNIQ_KEY").as_deref(), Some("K1"));
    let enqueued: i64 = prop(&delivered, "TIMER_ENQUEUE_MS")
        .unwrap()
        .parse()
        .unwrap();
    let dequeued: i64 = prop(&delivered, "TIMER_DEQUEUE_MS")
        .unwrap()
        .parse()
        .unwrap();
    assert!(enqueued <= dequeued && dequeued >= deliver_at);
    // Counted once the delivered copy is stored: it may lag the copy by a moment.
    let deadline = Instant::now() + LONG;
    loop {
        let status = store.timer_status().unwrap();
        if (status.delivered, status.pending) == (1, 0) || Instant::now() > deadline {
            assert_eq!((status.delivered, status.pending), (1, 0));
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_timer_files_are_rocketmqs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1_000);
    store.start_timer(true).unwrap();
    let at = (now_millis() + 60_000).to_string();
    put(&store, "orders", &[("TIMER_DELIVER_MS", &at)]).unwrap();
    let deadline = Instant::now() + LONG;
    while store.timer_status().unwrap().pending == 0 {
        assert!(Instant::now() < deadline, "never placed");
        std::thread::sleep(Duration::from_millis(2));
    }
    store.shutdown_timer();
    let root = dir.path();
    let wheel = std::fs::metadata(root.join("timerwheel")).unwrap().len();
    assert_eq!(wheel, 7 * 86_400 * 2 * 32, "two turns of 32-byte slots");
    let log = std::fs::read(root.join("timerlog").join(format!("{:020}", 0))).unwrap();
    assert_eq!(&log[0..4], &52i32.to_be_bytes(), "a 52-byte unit");
    assert_eq!(
        &log[4..12],
        &(-1i64).to_be_bytes(),
        "the slot's first: no previous"
    );
    assert_eq!(&log[12..16], &1i32.to_be_bytes(), "MAGIC_DEFAULT");
    assert_eq!(&log[40..44], &java_hash("orders").to_be_bytes());
    let check = std::fs::read(root.join("config").join("timercheck")).unwrap();
    assert_eq!(check.len(), 4096);
    assert_eq!(
        &check[16..24],
        &1i64.to_be_bytes(),
        "the queue offset placed"
    );
    assert_eq!(
        &check[8..16],
        &52i64.to_be_bytes(),
        "the timer log flushed to its end"
    );
    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("config").join("timermetrics")).unwrap())
            .unwrap();
    assert_eq!(metrics["timingCount"]["orders"]["count"], 1);
    assert_eq!(java_hash("orders"), -1_008_770_331);
}

#[test]
fn a_moment_passed_is_delivered_at_once_and_bad_times_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1_000);
    put(&store, "orders", &[("TIMER_DELIVER_MS", "5")]).unwrap();
    assert_eq!(
        count(&store, "orders", 2),
        1,
        "already due: stored in its topic"
    );
    let refused = |props: &[(&str, &str)]| put(&store, "orders", props).unwrap_err().to_string();
    let e = refused(&[("TIMER_DELAY_SEC", "-5")]);
    assert!(e.contains("TIMER_DELAY_SEC=-5 is negative"), "{e}");
    let e = refused(&[("TIMER_DELIVER_MS", "soon")]);
    assert!(
        e.contains("TIMER_DELIVER_MS=\"soon\" is not a whole number"),
        "{e}"
    );
    let e = refused(&[("TIMER_DELAY_SEC", &(4 * 86_400).to_string())]);
    assert!(
        e.contains("max delay 259200000ms (timerMaxDelaySec=259200)"),
        "{e}"
    );
    let e = refused(&[("TIMER_DEL_UNIQKEY", "orders+K"), ("TIMER_DELIVER_MS", "5")]);
    assert!(e.contains("the message was delivered already"), "{e}");
    let properties = encode_properties([("TIMER_DELAY_MS", "10")]).unwrap();
    let draft = MessageDraft {
        topic: "orders",
        body: b"b",
        properties: &properties,
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: SocketAddr::from(([10, 0, 0, 1], 5)),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    };
    let e = store.put_batch(&[draft]).unwrap_err().to_string();
    assert!(e.contains("a batch cannot hold timer messages"), "{e}");
    // A delay level wins: the timer is not asked.
    put(
        &store,
        "orders",
        &[("DELAY", "1"), ("TIMER_DELAY_SEC", "-1")],
    )
    .unwrap();

    let off = tempfile::tempdir().unwrap();
    let mut disabled = config(off.path(), 1_000);
    disabled.timer.enable = false;
    let store = MessageStore::open(disabled).unwrap();
    let e = put(&store, "orders", &[("TIMER_DELAY_SEC", "5")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("timerWheelEnable is false"), "{e}");
    assert!(!off.path().join("config").join("timercheck").exists());
}

#[test]
fn the_keys_are_checked_by_name() {
    for (config, key) in [
        (
            TimerConfig {
                precision_ms: 0,
                ..TimerConfig::default()
            },
            "timerPrecisionMs",
        ),
        (
            TimerConfig {
                precision_ms: 300,
                ..TimerConfig::default()
            },
            "timerPrecisionMs",
        ),
        (
            TimerConfig {
                max_delay_sec: 0,
                ..TimerConfig::default()
            },
            "timerMaxDelaySec",
        ),
        (
            TimerConfig {
                log_file_size: 10,
                ..TimerConfig::default()
            },
            "mappedFileSizeTimerLog",
        ),
        (
            TimerConfig {
                congest_num_each_slot: 0,
                ..TimerConfig::default()
            },
            "timerCongestNumEachSlot",
        ),
    ] {
        assert_eq!(config.validate().unwrap_err().0, key);
    }
    assert!(TimerConfig::default().validate().is_ok());
}

#[test]
fn many_timers_of_one_slot_are_delivered_together_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1_000);
    store.start_timer(true).unwrap();
    let base = now_millis() + 600;
    for i in 0..300 {
        let at = (base + (i * 7) % 300).to_string();
        put(&store, "orders", &[("TIMER_DELIVER_MS", &at)]).unwrap();
    }
    wait_for(&store, "orders", 300);
    let mut last = 0;
    for (_, record) in store.get_messages("orders", 2, 0, 300).unwrap() {
        let m = record.view();
        let due = property_i64(m.properties, PROPERTY_TIMER_DELIVER_MS).unwrap();
        assert!(m.store_timestamp >= due, "delivered before its time");
        assert!(due >= last, "out of time order");
        last = due;
    }
}

#[test]
fn a_recall_cancels_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    store.start_timer(true).unwrap();
    let at = (now_millis() + 800).to_string();
    put(
        &store,
        "orders",
        &[("TIMER_DELIVER_MS", &at), ("UNIQ_KEY", "GONE")],
    )
    .unwrap();
    put(
        &store,
        "orders",
        &[("TIMER_DELIVER_MS", &at), ("UNIQ_KEY", "KEPT")],
    )
    .unwrap();
    let out: i64 = prop(&props(&store, TIMER_TOPIC, 0, 0), "TIMER_OUT_MS")
        .unwrap()
        .parse()
        .unwrap();
    // What RECALL_MESSAGE puts: the handle's time is TIMER_OUT_MS + 1, the same slot.
    let handle_time = (out + 1).to_string();
    put(
        &store,
        "orders",
        &[
            ("TIMER_DELIVER_MS", &handle_time),
            ("TIMER_DEL_UNIQKEY", "orders+GONE"),
        ],
    )
    .unwrap();
    wait_for(&store, "orders", 1);
    // The slot closes a precision after its start: nothing else comes.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(count(&store, "orders", 2), 1);
    assert_eq!(
        prop(&props(&store, "orders", 2, 0), "UNIQ_KEY").as_deref(),
        Some("KEPT")
    );
}

#[test]
fn pending_timers_survive_a_restart_and_none_is_delivered_twice() {
    let dir = tempfile::tempdir().unwrap();
    let deliver_at = now_millis() + 1_500;
    {
        let store = open(dir.path(), 100);
        store.start_timer(true).unwrap();
        for i in 0..200 {
            let at = (deliver_at + i).to_string();
            put(&store, "orders", &[("TIMER_DELIVER_MS", &at)]).unwrap();
        }
        let deadline = Instant::now() + LONG;
        while store.timer_status().unwrap().pending < 200 {
            assert!(Instant::now() < deadline, "never placed");
            std::thread::sleep(Duration::from_millis(2));
        }
        store.close().unwrap();
    }
    let store = open(dir.path(), 100);
    assert_eq!(
        store.timer_status().unwrap().pending,
        200,
        "the metrics came back"
    );
    let files = store.timer().unwrap().state().log.file_starts();
    assert_eq!(
        files,
        [0, 4096, 8192],
        "4096-byte files of 78 units and a blank"
    );
    store.start_timer(true).unwrap();
    let arrived = wait_for(&store, "orders", 200);
    assert!(arrived >= deliver_at);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count(&store, "orders", 2), 200, "none twice");
}

#[test]
fn a_delay_past_the_window_rolls_over_and_still_arrives_at_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), 100);
    config.timer.roll_window_slots = 3;
    let store = Arc::new(MessageStore::open(config).unwrap());
    store.start_timer(true).unwrap();
    let deliver_at = now_millis() + 900;
    let at = deliver_at.to_string();
    put(&store, "orders", &[("TIMER_DELIVER_MS", &at)]).unwrap();
    let arrived = wait_for(&store, "orders", 1);
    assert!(arrived >= deliver_at);
    assert!(
        count(&store, TIMER_TOPIC, 0) >= 2,
        "put back into the timer topic to roll"
    );
    let delivered = props(&store, "orders", 2, 0);
    assert!(
        prop(&delivered, "TIMER_ROLL_TIMES").is_some(),
        "{delivered:?}"
    );
}

#[test]
fn a_slave_places_but_never_delivers_and_promoted_delivers_what_its_master_had_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    // A slave: its master had placed the first message only.
    store.start_timer(false).unwrap();
    let timer = store.timer().unwrap();
    let mut master = Checkpoint {
        last_read_time_ms: now_millis() / 100 * 100,
        master_timer_queue_offset: 1,
        ..Checkpoint::default()
    };
    timer.sync_checkpoint(&master.encode()).unwrap();
    let at = (now_millis() + 300).to_string();
    put(&store, "orders", &[("TIMER_DELIVER_MS", &at)]).unwrap();
    put(&store, "orders", &[("TIMER_DELIVER_MS", &at)]).unwrap();
    let deadline = Instant::now() + LONG;
    while timer.status(&*store).pending < 1 {
        assert!(Instant::now() < deadline, "never placed");
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(600));
    let status = timer.status(&*store);
    assert_eq!(
        (status.pending, status.enqueue_behind),
        (1, 1),
        "no further than its master"
    );
    assert_eq!(count(&store, "orders", 2), 0, "a slave delivers nothing");
    master.master_timer_queue_offset = 2;
    timer.sync_checkpoint(&master.encode()).unwrap();
    store.shutdown_timer();
    store.start_timer(true).unwrap();
    wait_for(&store, "orders", 2);
}

#[test]
fn a_start_deliver_time_is_held_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    store.start_timer(true).unwrap();
    let deliver_at = now_millis() + 400;
    put(
        &store,
        "orders",
        &[("__STARTDELIVERTIME", &deliver_at.to_string())],
    )
    .unwrap();
    assert_eq!(count(&store, "orders", 2), 0, "held, not delivered at once");
    assert!(wait_for(&store, "orders", 1) >= deliver_at);
}
