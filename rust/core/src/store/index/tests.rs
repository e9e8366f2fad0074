use std::net::SocketAddr;
use std::path::Path;

use super::file::{IndexFile, HEADER_SIZE};
use super::*;
use crate::commitlog::record::{encode_properties, MessageDraft};
use crate::commitlog::OwnedRecord;
use crate::store::MessageStore;
use crate::store::StoreConfig;

fn config(dir: &Path, slots: usize, entries: usize) -> StoreConfig {
    let mut config = StoreConfig::new(dir);
    config.mapped_file_size = 1024 * 1024;
    config.index.max_hash_slot_num = slots;
    config.index.max_index_num = entries;
    config
}

fn put(store: &MessageStore, topic: &str, props: &[(&str, &str)]) -> u64 {
    let properties = encode_properties(props.iter().copied()).unwrap();
    store
        .put(&MessageDraft {
            topic,
            body: b"body",
            properties: &properties,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 42,
            born_host: SocketAddr::from(([10, 0, 0, 1], 5)),
            reconsume_times: 0,
            prepared_tx_offset: 0,
        })
        .unwrap()
        .offset
}

fn query<'a>(topic: &'a str, key: &'a str, unique: bool, begin: i64, end: i64) -> KeyQuery<'a> {
    KeyQuery {
        topic,
        key,
        unique,
        max: 64,
        begin,
        end,
    }
}

fn find(store: &MessageStore, topic: &str, key: &str, unique: bool) -> Vec<u64> {
    store
        .find(&query(topic, key, unique, 0, i64::MAX))
        .unwrap()
        .iter()
        .map(OwnedRecord::offset)
        .collect()
}

#[test]
fn key_hash_is_javas_string_hash_code_made_non_negative() {
    // `String.hashCode` as printed by Java 17.
    assert_eq!(key_hash("TopicTest", "key1"), 1_655_984_460);
    assert_eq!(key_hash("orders", "ORDER-42"), 2_020_350_629);
    // UTF-16 code units, a surrogate pair included.
    assert_eq!(key_hash("T", "é中😀"), 1_829_848_682);
}

#[test]
fn every_key_and_unique_key_finds_its_messages_across_files() {
    let dir = tempfile::tempdir().unwrap();
    // Three slots, so chains mix keys; 50 entries, so the index rolls over several files.
    let store = MessageStore::open(config(dir.path(), 3, 50)).unwrap();
    let mut by_key: Vec<(String, u64)> = Vec::new();
    for i in 0..120 {
        let key = format!("k{}", i % 40);
        let uniq = format!("U{i:04}");
        let keys = format!("{key} shared");
        let at = put(&store, "T", &[("KEYS", &keys), ("UNIQ_KEY", &uniq)]);
        by_key.push((key, at));
        assert_eq!(find(&store, "T", &uniq, true), vec![at]);
    }
    assert!(store.index_files().len() > 3, "{:?}", store.index_files());
    for k in 0..40 {
        let key = format!("k{k}");
        let want: Vec<u64> = by_key
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, at)| *at)
            .collect();
        assert_eq!(find(&store, "T", &key, false), want, "{key}");
    }
    // `shared` is on all 120: one query gives at most maxMsgsNumBatch, the newest.
    let shared = find(&store, "T", "shared", false);
    assert_eq!(shared.len(), MAX_MSGS_NUM_BATCH);
    assert_eq!(shared.last(), by_key.last().map(|(_, at)| at));
    // Another topic's key, a unique key asked as a key, a key nobody has: nothing.
    assert!(find(&store, "U", "k1", false).is_empty());
    assert!(find(&store, "T", "U0001", false).is_empty());
    assert!(find(&store, "T", "nobody", false).is_empty());
}

#[test]
fn a_time_range_outside_the_messages_finds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 100, 1000)).unwrap();
    let at = put(&store, "T", &[("KEYS", "a")]);
    let now = crate::protocol::now_millis();
    let found = store
        .find(&query("T", "a", false, now - 60_000, now + 60_000))
        .unwrap();
    assert_eq!(
        found.iter().map(OwnedRecord::offset).collect::<Vec<_>>(),
        vec![at]
    );
    for (begin, end) in [(0, now - 60_000), (now + 60_000, i64::MAX), (now, 0)] {
        let found = store.find(&query("T", "a", false, begin, end)).unwrap();
        assert!(found.is_empty(), "[{begin}, {end}]");
    }
}

#[test]
fn a_reopened_store_resumes_without_indexing_twice_and_a_reader_finds_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Vec::new();
    {
        let store = MessageStore::open(config(dir.path(), 10, 100)).unwrap();
        for _ in 0..5 {
            first.push(put(&store, "T", &[("KEYS", "again")]));
        }
        // Keyless messages after the last keyed one: the progress still covers them.
        for _ in 0..5 {
            put(&store, "T", &[]);
        }
        store.close().unwrap();
    }
    let progress = std::fs::read(dir.path().join("indexcheckpoint")).unwrap();
    let store = MessageStore::open(config(dir.path(), 10, 100)).unwrap();
    assert_eq!(
        u64::from_be_bytes(progress[..8].try_into().unwrap()),
        store.max_offset()
    );
    assert_eq!(find(&store, "T", "again", false), first);
    first.push(put(&store, "T", &[("KEYS", "again")]));
    assert_eq!(find(&store, "T", "again", false), first);
    store.close().unwrap();

    let mut ro = config(dir.path(), 10, 100);
    ro.read_only = true;
    let reader = MessageStore::open(ro).unwrap();
    assert_eq!(find(&reader, "T", "again", false), first);
}

#[test]
fn the_checkpoint_advances_while_puts_never_pause() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 10, 100_000)).unwrap();
    let checkpoint = dir.path().join("indexcheckpoint");
    let synced = || {
        std::fs::read(&checkpoint)
            .ok()
            .is_some_and(|b| b.len() >= 8 && u64::from_be_bytes(b[..8].try_into().unwrap()) > 0)
    };
    // Puts without a pause, until the index syncs once (it does every second); without a
    // sync in a minute it syncs only when puts stop.
    let give_up = Instant::now() + Duration::from_secs(60);
    while !synced() {
        assert!(
            Instant::now() < give_up,
            "the index never synced under steady puts"
        );
        for _ in 0..100 {
            put(&store, "T", &[("KEYS", "steady")]);
        }
    }
    store.close().unwrap();
}

#[test]
fn a_store_without_its_checkpoint_resumes_after_the_newest_entry() {
    let dir = tempfile::tempdir().unwrap();
    let at = {
        let store = MessageStore::open(config(dir.path(), 10, 100)).unwrap();
        let at = put(&store, "T", &[("KEYS", "a b")]);
        store.close().unwrap();
        at
    };
    // As a store RocketMQ wrote: index files, no `indexcheckpoint`.
    std::fs::remove_file(dir.path().join("indexcheckpoint")).unwrap();
    let store = MessageStore::open(config(dir.path(), 10, 100)).unwrap();
    let next = put(&store, "T", &[("KEYS", "b")]);
    assert_eq!(find(&store, "T", "a", false), vec![at]);
    assert_eq!(find(&store, "T", "b", false), vec![at, next]);
}

#[test]
fn truncating_the_log_takes_the_index_back_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 7, 12)).unwrap();
    let offsets: Vec<u64> = (0..30)
        .map(|i| put(&store, "T", &[("KEYS", &format!("k{} all", i % 3))]))
        .collect();
    assert_eq!(find(&store, "T", "k0", false).len(), 10);
    store.truncate_to(offsets[10]).unwrap();
    assert_eq!(
        find(&store, "T", "k0", false),
        vec![offsets[0], offsets[3], offsets[6], offsets[9]]
    );
    assert_eq!(find(&store, "T", "all", false), offsets[..10].to_vec());
    // Writing again after the cut indexes the new messages where the old ones were.
    let again = put(&store, "T", &[("KEYS", "k0")]);
    assert_eq!(find(&store, "T", "k0", false).last(), Some(&again));
    assert_eq!(find(&store, "T", "k0", false).len(), 5);
}

#[test]
fn a_writer_killed_mid_message_leaves_chains_a_repair_restores() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20260101000000000");
    let mut f = IndexFile::create(path.clone(), 2, 20, 0, 0).unwrap();
    for (i, hash) in [5, 6, 5].into_iter().enumerate() {
        assert!(f.put_key(hash, 100 * (i as i64 + 1), 1_000_000).unwrap());
    }
    f.persist_header();
    // Two more entries reach the file, its header does not: the writer died mid-message.
    assert!(f.put_key(5, 400, 1_001_000).unwrap());
    assert!(f.put_key(8, 400, 1_001_000).unwrap());
    drop(f);
    let mut f = IndexFile::open(&path, 2, 20, true).unwrap();
    assert_eq!(f.header().index_count, 4);
    assert!(f.repair(i64::MAX, |_| None).unwrap());
    let select = |f: &IndexFile, hash| {
        let mut out = Vec::new();
        f.select(hash, 10, 0, i64::MAX, &mut out);
        out
    };
    assert_eq!(select(&f, 5), vec![300, 100]);
    assert_eq!(select(&f, 6), vec![200]);
    // Then the log turns out to end at 250: the entry at 300 goes, its chain is cut back.
    assert!(f.repair(250, |o| Some(1_000_000 + o)).unwrap());
    assert_eq!(select(&f, 5), vec![100]);
    assert_eq!(f.header().end_phy_offset, 200);
    assert_eq!(f.header().end_timestamp, 1_000_200);
    assert!(!f.repair(250, |_| None).unwrap());
}

#[test]
fn the_file_layout_is_rocketmqs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20260101000000000");
    let mut f = IndexFile::create(path.clone(), 4, 8, 0, 0).unwrap();
    assert!(f
        .put_key(6, 0x0102_0304_0506_0708, 1_700_000_000_000)
        .unwrap());
    assert!(f.put_key(10, 77, 1_700_000_003_500).unwrap());
    f.persist_header();
    f.flush().unwrap();
    drop(f);
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(raw.len(), IndexFile::size(4, 8));
    assert_eq!(raw.len(), 40 + 4 * 4 + 8 * 20);
    let long = |at: usize| i64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
    let int = |at: usize| i32::from_be_bytes(raw[at..at + 4].try_into().unwrap());
    // Header: begin/end timestamp, begin/end offset, slots used, next entry.
    assert_eq!(long(0), 1_700_000_000_000);
    assert_eq!(long(8), 1_700_000_003_500);
    assert_eq!(long(16), 0x0102_0304_0506_0708);
    assert_eq!(long(24), 77);
    assert_eq!((int(32), int(36)), (1, 3));
    // Both hashes land in slot 2 (6 % 4, 10 % 4), which holds the newest entry's number.
    assert_eq!(int(HEADER_SIZE + 2 * 4), 2);
    let entry = |n: usize| HEADER_SIZE + 4 * 4 + n * 20;
    assert_eq!(int(entry(1)), 6);
    assert_eq!(long(entry(1) + 4), 0x0102_0304_0506_0708);
    assert_eq!((int(entry(1) + 12), int(entry(1) + 16)), (0, 0));
    assert_eq!(int(entry(2)), 10);
    assert_eq!(long(entry(2) + 4), 77);
    // Seconds after the first message, and the previous entry of the slot.
    assert_eq!((int(entry(2) + 12), int(entry(2) + 16)), (3, 1));
}

#[test]
fn rolled_back_half_messages_are_not_indexed_and_a_disabled_index_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 10, 100)).unwrap();
    let properties = encode_properties([("KEYS", "tx")]).unwrap();
    let draft = |sys_flag| MessageDraft {
        topic: "T",
        body: b"b",
        properties: &properties,
        queue_id: 0,
        flag: 0,
        sys_flag,
        born_timestamp: 1,
        born_host: SocketAddr::from(([10, 0, 0, 1], 5)),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    };
    let committed = store.put(&draft(0x2 << 2)).unwrap().offset;
    store.put(&draft(0x3 << 2)).unwrap();
    assert_eq!(find(&store, "T", "tx", false), vec![committed]);
    store.close().unwrap();

    let mut off = config(dir.path(), 10, 100);
    off.index.enabled = false;
    let store = MessageStore::open(off).unwrap();
    let Err(err) = store.find(&query("T", "tx", false, 0, i64::MAX)) else {
        panic!("a store without an index answered a query");
    };
    assert!(err.to_string().contains("messageIndexEnable"), "{err}");
}

#[test]
fn a_geometry_rocketmq_cannot_map_is_refused_by_name() {
    for (slots, entries) in [(0, 10), (10, 1), (100_000_000, 100_000_000)] {
        let config = IndexConfig {
            enabled: true,
            max_hash_slot_num: slots,
            max_index_num: entries,
        };
        let err = config.validate().unwrap_err();
        assert!(
            err.contains("maxHashSlotNum") && err.contains("maxIndexNum"),
            "{err}"
        );
    }
    IndexConfig::default().validate().unwrap();
}

#[test]
fn a_message_held_for_the_confirm_offset_is_found_once_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), 64, 256)).unwrap();
    let first = put(&store, "T", &[("KEYS", "k")]);
    store.set_confirm_offset(Some(store.max_offset())).unwrap();
    let held = put(&store, "T", &[("KEYS", "k")]);
    // `find` waits for the index to cover what consumers can read, and no further.
    assert_eq!(find(&store, "T", "k", false), vec![first]);
    store.set_confirm_offset(None).unwrap();
    assert_eq!(find(&store, "T", "k", false), vec![first, held]);
}
