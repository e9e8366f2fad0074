//! A rocketha slave speaking RocketMQ 5's AutoSwitch HA to a master that behaves as RocketMQ
//! 5.4.0's `AutoSwitchHAConnection` does on the wire (epoch-labelled 36-byte frames, cut at
//! epoch boundaries and labelled with the next epoch there, a heartbeat with offset -1 before
//! the transfer starts): a new slave copies the log and its epochs, a deposed master's log is
//! truncated to where the histories agree, and a log of another history is refused.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rocketha_core::commitlog::record::{encode_properties, MessageDraft};
use rocketha_core::ha::autoswitch::frame::*;
use rocketha_core::ha::client::HaClient;
use rocketha_core::ha::epoch::{EpochEntry, EpochFileCache};
use rocketha_core::ha::HaConfig;
use rocketha_core::{MessageStore, StoreConfig};

use common::{log_bytes_from, wait_until};

fn store(dir: &Path) -> Arc<MessageStore> {
    let mut c = StoreConfig::new(dir);
    c.mapped_file_size = 64 * 1024;
    Arc::new(MessageStore::open(c).unwrap())
}

/// Message `i`, whose size depends only on `i`: two stores given the same `i`s hold records at
/// the same offsets.
fn put(store: &MessageStore, i: usize) {
    let props = encode_properties([("TAGS", "t")]).unwrap();
    let body = vec![(i % 251) as u8; (i * 7919) % 3000];
    let draft = MessageDraft {
        topic: "T",
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

/// A master of `epochs` over `store`, serving one slave as RocketMQ 5.4.0's does; returns
/// the slave's handshake.
fn rocketmq_master(
    listener: TcpListener,
    store: Arc<MessageStore>,
    epochs: Vec<EpochEntry>,
) -> JoinHandle<SlaveHandshake> {
    std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut hello = [0u8; SLAVE_HANDSHAKE_LEN];
        sock.read_exact(&mut hello).unwrap();
        let hello = SlaveHandshake::decode(&hello).unwrap();
        let max = store.max_offset();
        sock.write_all(&encode_master_handshake(max, &epochs))
            .unwrap();
        // Before the slave's first report RocketMQ's heartbeat names no offset.
        let first = epochs[0];
        let early = TransferHeader {
            body_size: 0,
            offset: None,
            epoch: first.epoch,
            epoch_start_offset: first.start_offset,
            confirm_offset: max,
        };
        sock.write_all(&early.encode()).unwrap();
        let Some(mut next) = read_report(&mut sock) else {
            return hello;
        };
        let cache = EpochFileCache::in_memory(epochs.iter().map(|e| (e.epoch, e.start_offset)));
        while next < max {
            let entry = cache.entry_by_offset(next).unwrap();
            let mut size = ((max - next) as usize).min(32 * 1024);
            let mut label = entry;
            if entry.end_offset != u64::MAX && next + size as u64 >= entry.end_offset {
                // Cut at the epoch's end, and labelled with the next epoch (RocketMQ's order).
                size = (entry.end_offset - next) as usize;
                label = cache.next_entry(entry.epoch).unwrap();
            }
            let body = store.read_raw(next, size).unwrap();
            let size = body.len();
            let header = TransferHeader {
                body_size: size,
                offset: Some(next),
                epoch: label.epoch,
                epoch_start_offset: label.start_offset,
                confirm_offset: max,
            };
            sock.write_all(&header.encode()).unwrap();
            sock.write_all(body.bytes()).unwrap();
            next += size as u64;
        }
        while read_report(&mut sock).is_some_and(|acked| acked < max) {}
        hello
    })
}

fn read_report(sock: &mut TcpStream) -> Option<u64> {
    let mut raw = [0u8; REPORT_LEN];
    sock.read_exact(&mut raw).ok()?;
    match decode_slave_frame(&raw).unwrap() {
        Some((SlaveFrame::Report(offset), _)) => Some(offset),
        other => panic!("expected a report, got {other:?}"),
    }
}

struct Master {
    store: Arc<MessageStore>,
    epochs: Vec<EpochEntry>,
}

/// A master whose epochs 1, 2, 3 wrote messages `0..10`, `10..20`, `20..30`.
fn master(dir: &Path) -> Master {
    let store = store(dir);
    let mut epochs = Vec::new();
    for (epoch, range) in [(1, 0..10), (2, 10..20), (3, 20..30)] {
        epochs.push(EpochEntry::new(epoch, store.max_offset()));
        range.for_each(|i| put(&store, i));
    }
    Master { store, epochs }
}

fn slave(store: Arc<MessageStore>, epochs: Arc<EpochFileCache>, addr: SocketAddr) -> HaClient {
    let config = HaConfig {
        epochs: Some(epochs),
        ..HaConfig::default()
    };
    HaClient::start(store, Some(addr.to_string()), config, 2).unwrap()
}

fn serve(m: &Master) -> (SocketAddr, JoinHandle<SlaveHandshake>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (
        addr,
        rocketmq_master(listener, m.store.clone(), m.epochs.clone()),
    )
}

fn starts(epochs: &EpochFileCache) -> Vec<(i32, u64)> {
    epochs
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

#[test]
fn a_new_slave_copies_the_log_and_its_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    let s = store(&dir.path().join("s"));
    let path = dir.path().join("s/epochFileCheckpoint");
    let epochs = Arc::new(EpochFileCache::load(&path).unwrap());
    let (addr, served) = serve(&m);
    let client = slave(s.clone(), epochs.clone(), addr);
    let hello = served.join().unwrap();
    assert_eq!((hello.broker_id, hello.sync_from_last_file), (2, false));
    wait_until("the copy", || s.max_offset() == m.store.max_offset());
    assert_eq!(log_bytes_from(&s, 0), log_bytes_from(&m.store, 0));
    let expected: Vec<_> = m.epochs.iter().map(|e| (e.epoch, e.start_offset)).collect();
    assert_eq!(starts(&epochs), expected);
    // Persisted in RocketMQ's format: a RocketMQ broker on this store reads the same.
    assert_eq!(starts(&EpochFileCache::load(&path).unwrap()), expected);
    assert_eq!(client.stats().confirm_offset, m.store.max_offset());
    client.shutdown();
}

#[test]
fn a_deposed_masters_log_is_cut_back_to_where_the_histories_agree() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    // The master of epoch 2 went on writing after the controller elected epoch 3 elsewhere.
    let s = store(&dir.path().join("s"));
    let epochs = Arc::new(EpochFileCache::load(&dir.path().join("s/epochs")).unwrap());
    for (epoch, range) in [(1, 0..10), (2, 10..20)] {
        epochs.append(epoch, s.max_offset()).unwrap();
        range.for_each(|i| put(&s, i));
    }
    (100..106).for_each(|i| put(&s, i));
    let agreed = m.epochs[2].start_offset;
    assert!(s.max_offset() > agreed);
    let (addr, served) = serve(&m);
    let client = slave(s.clone(), epochs.clone(), addr);
    served.join().unwrap();
    wait_until("the copy", || s.max_offset() == m.store.max_offset());
    assert_eq!(log_bytes_from(&s, agreed), log_bytes_from(&m.store, agreed));
    let expected: Vec<_> = m.epochs.iter().map(|e| (e.epoch, e.start_offset)).collect();
    assert_eq!(starts(&epochs), expected);
    let said: Vec<String> = client
        .events()
        .drain(Duration::ZERO)
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert!(
        said.iter()
            .any(|r| r.contains(&format!("to {agreed}, where it last agrees"))),
        "{said:?}"
    );
    client.shutdown();
}

#[test]
fn a_log_of_another_history_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    for (name, epochs) in [("other", vec![(7, 0)]), ("none", vec![])] {
        let s = store(&dir.path().join(name));
        (0..3).for_each(|i| put(&s, i));
        let before = log_bytes_from(&s, 0);
        let cache = Arc::new(EpochFileCache::in_memory(epochs));
        let (addr, _served) = serve(&m);
        let client = slave(s.clone(), cache, addr);
        let refused = loop {
            let events = client.events().drain(Duration::from_secs(5));
            if let Some(e) = events.into_iter().find(|e| e.problem) {
                break e.reason;
            }
        };
        let why = if name == "other" {
            "is in master"
        } else {
            "but no epoch file"
        };
        assert!(refused.contains(why), "{name}: {refused}");
        client.shutdown();
        assert_eq!(log_bytes_from(&s, 0), before, "{name}: nothing written");
    }
}

/// A rocketha master of `m`'s epochs and log.
fn rocketha_master(m: &Master) -> rocketha_core::ha::master::HaMaster {
    let epochs = EpochFileCache::in_memory(m.epochs.iter().map(|e| (e.epoch, e.start_offset)));
    let config = HaConfig {
        epochs: Some(Arc::new(epochs)),
        ..HaConfig::default()
    };
    let listen = "127.0.0.1:0".parse().unwrap();
    rocketha_core::ha::master::HaMaster::start(m.store.clone(), listen, config).unwrap()
}

#[test]
fn a_rocketha_master_answers_as_rocketmqs_does() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    let ha = rocketha_master(&m);
    let mut sock = TcpStream::connect(ha.local_addr()).unwrap();
    let hello = SlaveHandshake {
        sync_from_last_file: false,
        async_learner: false,
        broker_id: 3,
    };
    sock.write_all(&hello.encode()).unwrap();
    let max = m.store.max_offset();
    let expected = encode_master_handshake(max, &m.epochs);
    let mut answer = vec![0u8; expected.len()];
    sock.read_exact(&mut answer).unwrap();
    assert_eq!(answer, expected);
    sock.write_all(&encode_report(0)).unwrap();
    // Frames from 0, each within one epoch and labelled with it, up to the max.
    let mut got = Vec::new();
    let mut labels = Vec::new();
    while (got.len() as u64) < max {
        let mut raw = [0u8; TRANSFER_HEADER_LEN];
        sock.read_exact(&mut raw).unwrap();
        let h = TransferHeader::decode(&raw, 1 << 20).unwrap();
        assert_eq!(h.offset, Some(got.len() as u64));
        assert_eq!(h.confirm_offset, max);
        let mut body = vec![0u8; h.body_size];
        sock.read_exact(&mut body).unwrap();
        let epoch = m
            .epochs
            .iter()
            .rev()
            .find(|e| e.start_offset <= h.offset.unwrap())
            .unwrap();
        assert_eq!(
            (h.epoch, h.epoch_start_offset),
            (epoch.epoch, epoch.start_offset)
        );
        let end = h.offset.unwrap() + body.len() as u64;
        assert!(m
            .epochs
            .iter()
            .all(|e| e.start_offset <= h.offset.unwrap() || e.start_offset >= end));
        labels.push(h.epoch);
        got.extend_from_slice(&body);
    }
    assert_eq!(got, log_bytes_from(&m.store, 0));
    labels.dedup();
    assert_eq!(labels, vec![1, 2, 3]);
    // Its ack, by the broker id of the handshake.
    sock.write_all(&encode_report(max)).unwrap();
    wait_until("the ack", || {
        ha.acks().slave_offsets().first() == Some(&max)
    });
    assert_eq!(ha.connections()[0].slave_id, Some(3));
    ha.shutdown();
}

#[test]
fn a_rocketha_slave_of_a_rocketha_master_truncates_and_copies() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    let ha = rocketha_master(&m);
    let s = store(&dir.path().join("s"));
    let epochs = Arc::new(EpochFileCache::load(&dir.path().join("s/epochs")).unwrap());
    for (epoch, range) in [(1, 0..10), (2, 10..20)] {
        epochs.append(epoch, s.max_offset()).unwrap();
        range.for_each(|i| put(&s, i));
    }
    (200..203).for_each(|i| put(&s, i));
    let client = slave(s.clone(), epochs.clone(), ha.local_addr());
    wait_until("the copy", || s.max_offset() == m.store.max_offset());
    let agreed = m.epochs[2].start_offset;
    assert_eq!(log_bytes_from(&s, agreed), log_bytes_from(&m.store, agreed));
    let expected: Vec<_> = m.epochs.iter().map(|e| (e.epoch, e.start_offset)).collect();
    assert_eq!(starts(&epochs), expected);
    // Later puts follow.
    (30..40).for_each(|i| put(&m.store, i));
    wait_until("the new puts", || s.max_offset() == m.store.max_offset());
    client.shutdown();
    ha.shutdown();
}

#[test]
fn an_autoswitch_master_refuses_what_cannot_work() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    let listen = "127.0.0.1:0".parse().unwrap();
    for (config, why) in [
        (
            HaConfig {
                epochs: Some(Arc::new(EpochFileCache::in_memory([]))),
                ..HaConfig::default()
            },
            "needs its epoch",
        ),
        (
            HaConfig {
                epochs: Some(Arc::new(EpochFileCache::in_memory([(1, 0)]))),
                auth_secret: Some(b"s".to_vec()),
                ..HaConfig::default()
            },
            "haAuthSecret does not apply",
        ),
    ] {
        let err = rocketha_core::ha::master::HaMaster::start(m.store.clone(), listen, config)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(why), "{err}");
    }
    // A classic slave's 8-byte report is refused as what it is.
    let ha = rocketha_master(&m);
    let mut sock = TcpStream::connect(ha.local_addr()).unwrap();
    sock.write_all(&[0u8; 16]).unwrap();
    let closed = loop {
        let events = ha.events().drain(Duration::from_secs(5));
        if let Some(e) = events.into_iter().find(|e| e.problem) {
            break e.reason;
        }
    };
    assert!(closed.contains("same HA mode"), "{closed}");
    ha.shutdown();
}
