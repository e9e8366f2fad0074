//! Retention on small segments, with `fileReservedTime` hours shrunk to milliseconds and the
//! disk use faked: old segments go, the current one stays, consume queues follow, a full disk
//! cleans forcibly and refuses puts past the warning level, and segments take disk as written.

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use rocketha_core::commitlog::record::{encode_properties, MessageDraft};
use rocketha_core::error::CommitLogError;
use rocketha_core::store::CleanConfig;
use rocketha_core::{MessageStore, StoreConfig};

const SEGMENT: u64 = 64 * 1024;

/// Every hour is a `deleteWhen` hour, so a test never depends on the time of day.
fn every_hour() -> Vec<u32> {
    (0..24).collect()
}

fn open(dir: &std::path::Path, reserved_hours: u64) -> MessageStore {
    let mut c = StoreConfig::new(dir);
    c.mapped_file_size = SEGMENT;
    c.cq_entries_per_file = 50;
    c.clean = CleanConfig {
        delete_when: every_hour(),
        file_reserved_time: reserved_hours,
        hour: Duration::from_millis(1),
        // The thread stays out of the way: passes run when a test says.
        clean_resource_interval: Duration::from_secs(3600),
        ..CleanConfig::default()
    };
    MessageStore::open(c).unwrap()
}

fn put(store: &MessageStore, i: usize) -> Result<u64, CommitLogError> {
    let props = encode_properties([("TAGS", "t")]).unwrap();
    let body = vec![(i % 251) as u8; 1000];
    let draft = MessageDraft {
        topic: "T",
        body: &body,
        properties: &props,
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: SocketAddr::from(([127, 0, 0, 1], 0)),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    };
    store.put(&draft).map(|r| r.offset)
}

fn fill_segments(store: &MessageStore, segments: usize) -> usize {
    let mut i = 0;
    while store.segments().len() < segments {
        put(store, i).unwrap();
        i += 1;
    }
    i
}

/// Makes every segment older than one (millisecond) "hour" by its modification time.
fn age(store: &MessageStore) {
    let past = std::time::SystemTime::now() - Duration::from_secs(60);
    for s in store.segments() {
        let file = std::fs::File::options().write(true).open(&s.path).unwrap();
        file.set_modified(past).unwrap();
    }
}

fn queue(store: &MessageStore) -> (i64, i64) {
    let (_, _, min, max) = store.queues().into_iter().next().unwrap();
    (min, max)
}

#[test]
fn expired_segments_go_oldest_first_never_the_current_one_and_queues_follow() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1);
    let count = fill_segments(&store, 14);
    let current = store.segments().last().unwrap().path.clone();
    let max = store.max_offset();
    age(&store);

    let report = store.clean_now().unwrap();
    // deleteFileBatchMax (10) a pass, oldest first.
    assert_eq!(report.commit_log_deleted.len(), 10);
    assert_eq!(store.min_offset(), 10 * SEGMENT);
    assert!(report.consume_queue_deleted > 0);
    let report = store.clean_now().unwrap();
    assert_eq!(report.commit_log_deleted.len(), 3);
    // The segment being written stays, whatever its age.
    assert_eq!(store.segments().len(), 1);
    assert_eq!(store.segments()[0].path, current);
    assert!(current.exists());
    assert_eq!(store.max_offset(), max);
    age(&store);
    assert_eq!(store.clean_now().unwrap().commit_log_deleted.len(), 0);

    // The queue's floor is its first entry in what is left.
    let (min, max_qo) = queue(&store);
    assert_eq!(max_qo, count as i64);
    let first = store.get_messages("T", 0, min, 1).unwrap();
    assert_eq!(first[0].1.offset(), store.min_offset());
    match store.get_messages("T", 0, min - 1, 1) {
        Err(CommitLogError::OffsetTooSmall { min_offset, .. }) => assert_eq!(min_offset, min),
        other => panic!("expected OffsetTooSmall, got {:?}", other.map(|v| v.len())),
    }
    let cq_files = std::fs::read_dir(dir.path().join("consumequeue/T/0"))
        .unwrap()
        .count();
    assert!(cq_files < 5, "{cq_files} consume queue files left");

    // A reopened store keeps the floors and serves puts.
    drop(store);
    let store = open(dir.path(), 1);
    assert_eq!(queue(&store).0, min);
    put(&store, 0).unwrap();
}

#[test]
fn nothing_unexpired_goes_until_the_disk_is_past_the_forcible_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1_000_000_000);
    fill_segments(&store, 4);
    assert!(store.clean_now().unwrap().commit_log_deleted.is_empty());
    // Past diskMaxUsedSpaceRatio only expired segments go: there are none.
    store.set_fake_disk_used_ratio(Some(0.80)).unwrap();
    assert!(store.clean_now().unwrap().commit_log_deleted.is_empty());
    assert_eq!(store.min_offset(), 0);
    put(&store, 0).unwrap();
    // Past diskSpaceCleanForciblyRatio the oldest go anyway, and puts go on.
    store.set_fake_disk_used_ratio(Some(0.87)).unwrap();
    assert_eq!(store.clean_now().unwrap().commit_log_deleted.len(), 3);
    assert_eq!(store.segments().len(), 1);
    put(&store, 1).unwrap();
}

#[test]
fn past_the_warning_level_puts_are_refused_until_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1_000_000_000);
    fill_segments(&store, 2);
    let before = store.max_offset();
    store.set_fake_disk_used_ratio(Some(0.95)).unwrap();
    store.clean_now().unwrap();
    let refused = put(&store, 0).unwrap_err();
    assert!(matches!(refused, CommitLogError::DiskFull { .. }));
    let text = refused.to_string();
    assert!(
        text.contains("95.0%") && text.contains("diskSpaceWarningLevelRatio 90%"),
        "{text}"
    );
    assert_eq!(store.max_offset(), before, "a refused put writes nothing");
    let events = store.clean_events().unwrap().next(Duration::ZERO).unwrap();
    assert!(
        events
            .iter()
            .any(|(problem, t)| *problem && t.contains("refused")),
        "{events:?}"
    );
    // Still above the forcible ratio: still refused (RocketMQ's hysteresis).
    store.set_fake_disk_used_ratio(Some(0.86)).unwrap();
    store.clean_now().unwrap();
    assert!(put(&store, 0).is_err());
    store.set_fake_disk_used_ratio(Some(0.50)).unwrap();
    store.clean_now().unwrap();
    put(&store, 0).unwrap();
}

#[test]
fn a_new_segment_takes_disk_as_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = StoreConfig::new(dir.path());
    c.cq_entries_per_file = 300_000;
    let store = MessageStore::open(c).unwrap();
    put(&store, 0).unwrap();
    let segment = &store.segments()[0].path;
    let meta = std::fs::metadata(segment).unwrap();
    // Full length (readers and recovery map it whole), far from fully allocated: the writer
    // reserves a window ahead, not the whole 1 GiB.
    assert_eq!(meta.len(), 1 << 30);
    let allocated = meta.blocks() * 512;
    assert!(allocated <= 128 << 20, "{allocated} bytes allocated");
    drop(store);
}

#[test]
fn bad_retention_settings_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = StoreConfig::new(dir.path());
    c.clean.disk_space_warning_level_ratio = 120;
    let e = MessageStore::open(c).err().unwrap().to_string();
    assert!(e.contains("diskSpaceWarningLevelRatio 120"), "{e}");
}

/// The first event of `events` whose reason contains `text`, within a generous deadline.
fn wait_for_event(events: &rocketha_core::ha::HaEvents, text: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        for e in events.drain(Duration::from_millis(100)) {
            if e.problem && e.reason.contains(text) {
                return e.reason;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no event containing {text:?}"
        );
    }
}

#[test]
fn a_slave_behind_the_masters_floor_is_told_so_on_both_sides() {
    use rocketha_core::ha::client::HaClient;
    use rocketha_core::ha::master::HaMaster;
    use rocketha_core::ha::HaConfig;
    use std::sync::Arc;

    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Arc::new(open(mdir.path(), 1));
    fill_segments(&master, 6);
    // The slave holds the master's first two segments, then falls behind.
    let slave = Arc::new(open(sdir.path(), 1_000_000_000));
    let mut at = 0;
    while at < 2 * SEGMENT {
        let slice = master.read_raw(at, usize::MAX).unwrap();
        slave.append_raw(at, slice.bytes(), false).unwrap();
        at += slice.len() as u64;
    }
    let slave_max = slave.max_offset();
    age(&master);
    master.clean_now().unwrap();
    let floor = master.min_offset();
    assert!(floor > slave_max);

    let cfg = HaConfig::default();
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), cfg.clone()).unwrap();
    let client = HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), cfg, 1).unwrap();
    let said = wait_for_event(ha.events(), "below the master's min offset");
    assert!(
        said.contains(&floor.to_string()) && said.contains("start it empty"),
        "{said}"
    );
    let said = wait_for_event(client.events(), "retention deleted");
    assert!(said.contains(&floor.to_string()), "{said}");
    assert_eq!(slave.max_offset(), slave_max, "nothing written");
    client.shutdown();
    ha.shutdown();
}

#[test]
fn only_the_expired_prefix_goes_and_never_a_segment_from_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    // 600,000 one-millisecond "hours": ten minutes, far longer than the test.
    let store = open(dir.path(), 600_000);
    fill_segments(&store, 5);
    let segments = store.segments();
    let past = std::time::SystemTime::now() - Duration::from_secs(3600);
    // The first two and the fourth are old; the third is not, so the fourth stays too.
    for i in [0, 1, 3] {
        let file = std::fs::File::options()
            .write(true)
            .open(&segments[i].path)
            .unwrap();
        file.set_modified(past).unwrap();
    }
    let deleted = store.clean_now().unwrap().commit_log_deleted;
    assert_eq!(
        deleted,
        vec![segments[0].path.clone(), segments[1].path.clone()]
    );
    assert_eq!(store.min_offset(), segments[2].start);
    assert!(segments[3].path.exists());
}

#[test]
fn a_connected_slave_that_falls_behind_the_floor_is_told_so() {
    use rocketha_core::ha::client::HaClient;
    use rocketha_core::ha::master::HaMaster;
    use rocketha_core::ha::HaConfig;
    use std::sync::Arc;

    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Arc::new(open(mdir.path(), 1_000_000_000));
    fill_segments(&master, 6);
    let slave = Arc::new(open(sdir.path(), 1_000_000_000));
    // 4 KiB a second: the slave needs minutes for what the master holds, so the master's
    // forced clean below certainly deletes what it has not sent yet.
    let cfg = HaConfig {
        max_transfer_bytes_per_second: Some(4096),
        ..HaConfig::default()
    };
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), cfg.clone()).unwrap();
    let client = HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), cfg, 1).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while slave.max_offset() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "replication never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    master.set_fake_disk_used_ratio(Some(0.87)).unwrap();
    master.clean_now().unwrap();
    assert!(master.min_offset() > slave.max_offset());
    let said = wait_for_event(ha.events(), "fell behind");
    assert!(said.contains(&master.min_offset().to_string()), "{said}");
    client.shutdown();
    ha.shutdown();
}
