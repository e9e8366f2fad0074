//! Master and slave in one process over loopback: the slave's log ends byte-identical.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketha_core::commitlog::record::{encode_properties, MessageDraft};
use rocketha_core::ha::client::HaClient;
use rocketha_core::ha::master::HaMaster;
use rocketha_core::ha::HaConfig;
use rocketha_core::{MessageStore, StoreConfig};

use common::{log_bytes_from, wait_until};

fn store(dir: &std::path::Path) -> Arc<MessageStore> {
    let mut c = StoreConfig::new(dir);
    c.mapped_file_size = 64 * 1024;
    c.cq_entries_per_file = 1000;
    Arc::new(MessageStore::open(c).unwrap())
}

fn put(store: &MessageStore, i: usize) {
    let props = encode_properties([("TAGS", "t")]).unwrap();
    let body = vec![(i % 251) as u8; (i * 7919) % 5000];
    let draft = MessageDraft {
        topic: if i.is_multiple_of(3) { "A" } else { "B" },
        body: &body,
        properties: &props,
        queue_id: (i % 4) as i32,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 0,
        born_host: SocketAddr::from(([127, 0, 0, 1], 0)),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    };
    store.put(&draft).unwrap();
}

fn log_bytes(store: &MessageStore) -> Vec<u8> {
    log_bytes_from(store, store.min_offset())
}

/// Waits until a slave acked `target` (puts wait for it in the store's GroupTransferService).
fn acked(ha: &HaMaster, target: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while ha.acks().slave_offsets().first() < Some(&target) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn slave_converges_byte_identical_and_acks() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = store(md.path());
    for i in 0..300 {
        put(&master, i);
    }
    let cfg = HaConfig::default();
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), cfg.clone()).unwrap();
    let slave = store(sd.path());
    let client = HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), cfg, 1).unwrap();
    for i in 300..1500 {
        put(&master, i);
    }
    let target = master.max_offset();
    assert!(
        acked(&ha, target),
        "{:?}",
        client.events().drain(Duration::ZERO)
    );
    wait_until("slave max offset", || slave.max_offset() == target);
    assert_eq!(log_bytes(&slave), log_bytes(&master));
    assert_eq!(slave.queues(), master.queues());
    assert!(master.segments().len() >= 3);
    client.shutdown();
    wait_until("connection closed", || ha.connections().is_empty());
    ha.shutdown();
}

#[test]
fn mismatched_slave_writes_nothing() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = store(md.path());
    for i in 0..50 {
        put(&master, i);
    }
    let slave = store(sd.path());
    // A slave holding data the master never had at a larger offset than the master's.
    for i in 0..200 {
        put(&slave, i + 7);
    }
    let before = log_bytes(&slave);
    let cfg = HaConfig::default();
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), cfg.clone()).unwrap();
    let client = HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), cfg, 1).unwrap();
    let events = wait_for_event(&ha, "beyond the master's max offset");
    assert!(events.problem);
    client.shutdown();
    ha.shutdown();
    assert_eq!(log_bytes(&slave), before);
}

#[test]
fn bytes_pushed_at_another_offset_are_refused_in_rocketmqs_words() {
    let dir = tempfile::tempdir().unwrap();
    let slave = store(dir.path());
    put(&slave, 1);
    let (max, before) = (slave.max_offset(), log_bytes(&slave));
    // A heartbeat (no body) is checked like a frame with one.
    for body in [&b""[..], &b"xyz"[..]] {
        let err = slave
            .append_raw(max + 1, body, false)
            .unwrap_err()
            .to_string();
        let seed = format!(
            "master pushed offset not equal the max phy offset in slave, SLAVE: {max} MASTER: {}",
            max + 1
        );
        assert!(err.starts_with(&seed), "{err}");
    }
    assert_eq!(log_bytes(&slave), before);
}

fn wait_for_event(ha: &HaMaster, text: &str) -> rocketha_core::ha::HaEvent {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for e in ha.events().drain(Duration::from_millis(100)) {
            if e.reason.contains(text) {
                return e;
            }
        }
        assert!(Instant::now() < deadline, "no event containing {text:?}");
    }
}

#[test]
fn wrong_secret_gets_no_log_bytes() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = store(md.path());
    for i in 0..50 {
        put(&master, i);
    }
    let slave = store(sd.path());
    let mcfg = HaConfig {
        auth_secret: Some(b"right".to_vec()),
        ..HaConfig::default()
    };
    let scfg = HaConfig {
        auth_secret: Some(b"wrong".to_vec()),
        ..HaConfig::default()
    };
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), mcfg.clone()).unwrap();
    let client =
        HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), scfg, 1).unwrap();
    wait_for_event(&ha, "authentication failed");
    client.shutdown();
    assert_eq!(slave.max_offset(), 0);
    // The right secret replicates.
    let client =
        HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), mcfg, 1).unwrap();
    assert!(acked(&ha, master.max_offset()));
    assert_eq!(log_bytes(&slave), log_bytes(&master));
    client.shutdown();
    ha.shutdown();
}

/// A hand-driven slave: heartbeats arrive while idle, and a slave that stops reporting is
/// closed by housekeeping. Short intervals keep the test quick; nothing asserts on timing.
#[test]
fn heartbeats_flow_and_silent_slaves_are_closed() {
    use std::io::{Read, Write};
    let md = tempfile::tempdir().unwrap();
    let master = store(md.path());
    put(&master, 1);
    let cfg = HaConfig {
        heartbeat_interval: Duration::from_millis(20),
        housekeeping_interval: Duration::from_millis(300),
        ..HaConfig::default()
    };
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let mut sock = std::net::TcpStream::connect(ha.local_addr()).unwrap();
    sock.write_all(&0i64.to_be_bytes()).unwrap();
    // First the log, then heartbeats: 12-byte headers with size 0 at the end offset.
    let max = master.max_offset();
    let mut header = [0u8; 12];
    sock.read_exact(&mut header).unwrap();
    let size = i32::from_be_bytes(header[8..].try_into().unwrap()) as usize;
    let mut body = vec![0u8; size];
    sock.read_exact(&mut body).unwrap();
    assert_eq!(size as u64, max);
    for _ in 0..3 {
        sock.read_exact(&mut header).unwrap();
        assert_eq!(
            i64::from_be_bytes(header[..8].try_into().unwrap()) as u64,
            max
        );
        assert_eq!(&header[8..], &[0, 0, 0, 0]);
    }
    // Silent from here on: housekeeping closes the connection (read returns 0 eventually).
    let closed = wait_for_event(&ha, "housekeeping");
    assert!(closed.problem);
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = sock.read_to_end(&mut rest);
    assert!(ha.connections().is_empty());
    ha.shutdown();
}

#[test]
fn next_segment_is_preallocated_before_rollover() {
    let md = tempfile::tempdir().unwrap();
    let master = store(md.path());
    let mut i = 0;
    while master.max_offset() < 40 * 1024 {
        put(&master, i);
        i += 1;
    }
    let next = md
        .path()
        .join("commitlog")
        .join(format!("{:020}", 64 * 1024));
    wait_until("the next segment file", || next.exists());
    assert_eq!(std::fs::metadata(&next).unwrap().len(), 64 * 1024);
    assert_eq!(master.segments().len(), 1);
    drop(master);
    // Closing discards the unused preallocated segment, so a reopen ends where data ends.
    assert!(!next.exists());
}

#[test]
fn replica_takes_back_a_record_found_damaged_frames_after_it_began() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = store(md.path());
    for i in 0..40 {
        put(&master, i);
    }
    let log = log_bytes(&master);
    // A byte inside a record spanning several 1000-byte frames.
    let (start, size) = master
        .iter_from(0, false)
        .map(|r| r.unwrap())
        .map(|r| (r.offset() as usize, r.view().total_size as usize))
        .find(|&(_, size)| size > 2500)
        .unwrap();
    let mut damaged = log.clone();
    damaged[start + size / 2] ^= 0x20;
    let slave = store(sd.path());
    let cut = 1000;
    let refused = damaged
        .chunks(cut)
        .enumerate()
        .find_map(|(i, frame)| slave.append_raw((i * cut) as u64, frame, false).err())
        .unwrap();
    assert!(refused.to_string().contains("corrupt"), "{refused}");
    // Its first bytes, published with earlier frames, are taken back: the slave resumes at the
    // record's start and the master resends it whole.
    assert_eq!(slave.max_offset(), start as u64);
    let segment = std::fs::read(sd.path().join("commitlog").join(format!("{:020}", 0))).unwrap();
    assert!(
        segment[start..].iter().all(|&b| b == 0),
        "damaged bytes kept"
    );
    for (i, frame) in log[start..].chunks(cut).enumerate() {
        slave
            .append_raw((start + i * cut) as u64, frame, false)
            .unwrap();
    }
    assert_eq!(log_bytes(&slave), log);
    assert_eq!(slave.queues(), master.queues());
}

#[test]
fn flow_controlled_master_still_converges() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = store(md.path());
    for i in 0..60 {
        put(&master, i);
    }
    // A budget of a third of the log per second: the transfer spans several windows.
    let cfg = HaConfig {
        max_transfer_bytes_per_second: Some(master.max_offset() / 3),
        ..HaConfig::default()
    };
    let ha = HaMaster::start(master.clone(), "127.0.0.1:0".parse().unwrap(), cfg.clone()).unwrap();
    let slave = store(sd.path());
    let client = HaClient::start(slave.clone(), Some(ha.local_addr().to_string()), cfg, 1).unwrap();
    assert!(
        acked(&ha, master.max_offset()),
        "{:?}",
        client.events().drain(Duration::ZERO)
    );
    assert_eq!(log_bytes(&slave), log_bytes(&master));
    client.shutdown();
    ha.shutdown();
}

/// A master whose log holds a record with BODYCRC 0 (some peers never fill it in): the slave
/// refuses it, stops after a few connections instead of reconnecting forever, and replicates
/// it once told to accept a BODYCRC of 0.
#[test]
fn slave_stops_on_a_record_that_keeps_failing_and_accepts_zero_crc_when_told() {
    use rocketha_core::ha::HaState;
    use std::os::unix::fs::FileExt;
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = store(md.path());
    for i in 0..60 {
        put(&master, i);
    }
    let bad = master
        .iter_from(0, false)
        .nth(40)
        .unwrap()
        .unwrap()
        .offset();
    let start = bad - bad % (64 * 1024);
    let segment = md.path().join("commitlog").join(format!("{start:020}"));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(segment)
        .unwrap();
    // BODYCRC, 8 bytes into the record; the master serves its mapping, which sees the write.
    file.write_all_at(&[0; 4], bad - start + 8).unwrap();
    let slave = store(sd.path());
    let ha = HaMaster::start(
        master.clone(),
        "127.0.0.1:0".parse().unwrap(),
        HaConfig::default(),
    )
    .unwrap();
    let addr = ha.local_addr().to_string();
    let client =
        HaClient::start(slave.clone(), Some(addr.clone()), HaConfig::default(), 1).unwrap();
    wait_until("the slave to stop", || client.state() == HaState::Stopped);
    let stop = client.stop_reason().unwrap();
    assert_eq!((stop.offset, stop.master.as_str()), (bad, addr.as_str()));
    assert!(stop.reason.contains("stored 0x0"), "{}", stop.reason);
    assert!(slave.max_offset() <= bad);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        client.stats().connects,
        3,
        "a stopped slave does not reconnect"
    );
    client.shutdown();
    let cfg = HaConfig {
        accept_zero_body_crc: true,
        ..HaConfig::default()
    };
    let client = HaClient::start(slave.clone(), Some(addr), cfg, 1).unwrap();
    assert!(acked(&ha, master.max_offset()));
    assert_eq!(log_bytes(&slave), log_bytes(&master));
    client.shutdown();
    ha.shutdown();
}
