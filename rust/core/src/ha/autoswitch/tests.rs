//! Golden frames from RocketMQ 5.4.0's exchange: a new slave (broker id 2) joining a master
//! at epoch 3 with the entries 1-0, 2-1000, 3-5000 and max offset 6000.

use super::frame::*;
use super::*;
use crate::error::FrameError;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn entries() -> Vec<EpochEntry> {
    [(1, 0), (2, 1000), (3, 5000)]
        .into_iter()
        .map(|(e, s)| EpochEntry::new(e, s))
        .collect()
}

#[test]
fn the_handshake_frames_are_rocketmqs() {
    let hello = SlaveHandshake {
        sync_from_last_file: false,
        async_learner: false,
        broker_id: 2,
    };
    assert_eq!(hex(&hello.encode()), "00000001000000000000000000000002");
    assert_eq!(
        decode_slave_frame(&hello.encode()).unwrap(),
        Some((SlaveFrame::Handshake(hello), 16))
    );
    // Java reads only exactly 1 as true.
    let mut flags = hello.encode();
    flags[5] = 1;
    flags[7] = 2;
    let got = SlaveHandshake::decode(&flags).unwrap();
    assert!(got.sync_from_last_file && !got.async_learner);
    let answer = encode_master_handshake(6000, &entries());
    assert_eq!(
        hex(&answer),
        "00000001000000240000000000001770000000030000000100000000000000000000000200000000000003e8000000030000000000001388"
    );
    let header: &[u8; 20] = answer[..20].try_into().unwrap();
    assert_eq!(
        decode_master_handshake_header(header).unwrap(),
        (36, 6000, 3)
    );
    assert_eq!(decode_epoch_entries(&answer[20..]).unwrap(), entries());
    // An empty history says -1 as its last epoch.
    assert_eq!(hex(&encode_master_handshake(0, &[])[16..]), "ffffffff");
}

#[test]
fn transfer_frames_and_reports_are_rocketmqs() {
    let heartbeat = TransferHeader {
        body_size: 0,
        offset: Some(0),
        epoch: 1,
        epoch_start_offset: 0,
        confirm_offset: 6000,
    };
    let fields = ["00000002", "00000000", "0000000000000000", "00000001"];
    let rest = ["0000000000000000", "0000000000001770"];
    assert_eq!(
        hex(&heartbeat.encode()),
        [fields, [rest[0], rest[1], "", ""]].concat().concat()
    );
    let data = TransferHeader {
        body_size: 1000,
        offset: Some(0),
        epoch: 2,
        epoch_start_offset: 1000,
        confirm_offset: 6000,
    };
    // The frame F5 of the exchange: state, body 1000, offset 0, epoch 2 from 1000, confirm 6000.
    let f5 = "00000002000003e8000000000000000000000002";
    assert_eq!(
        hex(&data.encode()),
        format!("{f5}00000000000003e80000000000001770")
    );
    assert_eq!(TransferHeader::decode(&data.encode(), 32768).unwrap(), data);
    assert_eq!(hex(&encode_report(6000)), "000000020000000000001770");
    assert_eq!(
        decode_slave_frame(&encode_report(6000)).unwrap(),
        Some((SlaveFrame::Report(6000), 12))
    );
}

#[test]
fn bad_frames_are_refused_by_what_is_wrong() {
    // A classic slave's 8-byte report, read as an AutoSwitch frame: state 0.
    let classic = 5000i64.to_be_bytes();
    let err = decode_slave_frame(&[&classic[..], &[0; 8]].concat()).unwrap_err();
    assert!(
        err.to_string().contains("is the peer in the same HA mode"),
        "{err}"
    );
    // Partial frames wait for the rest.
    assert_eq!(decode_slave_frame(&encode_report(1)[..11]).unwrap(), None);
    let hello = SlaveHandshake {
        sync_from_last_file: false,
        async_learner: false,
        broker_id: 2,
    };
    assert_eq!(decode_slave_frame(&hello.encode()[..12]).unwrap(), None);
    let mut big = TransferHeader {
        body_size: 40000,
        offset: Some(0),
        epoch: 1,
        epoch_start_offset: 0,
        confirm_offset: 0,
    }
    .encode();
    assert!(matches!(
        TransferHeader::decode(&big, 32768),
        Err(FrameError::BodyTooLarge { .. })
    ));
    big[8] = 0x80;
    assert!(matches!(
        TransferHeader::decode(&big, 1 << 20),
        Err(FrameError::NegativeOffset(_))
    ));
    // Only a heartbeat may have no offset (-1: the master has not started the transfer).
    let early = TransferHeader {
        body_size: 0,
        offset: None,
        epoch: 1,
        epoch_start_offset: 0,
        confirm_offset: 0,
    };
    assert_eq!(&hex(&early.encode())[16..32], "ffffffffffffffff");
    assert_eq!(TransferHeader::decode(&early.encode(), 0).unwrap(), early);
    let mut header: [u8; 20] = encode_master_handshake(0, &entries())[..20]
        .try_into()
        .unwrap();
    header[7] = 13;
    assert!(matches!(
        decode_master_handshake_header(&header),
        Err(FrameError::BadEpochEntries(_))
    ));
    let backwards = encode_master_handshake(0, &[EpochEntry::new(2, 10), EpochEntry::new(1, 20)]);
    assert!(decode_epoch_entries(&backwards[20..])
        .unwrap_err()
        .to_string()
        .contains("1-20 follows 2-10"));
}

#[test]
fn a_slave_truncates_to_the_point_the_histories_share() {
    let master = entries();
    let empty = EpochFileCache::in_memory([]);
    assert_eq!(
        consistent_point(&empty, 0, &master, 6000),
        Truncation::Nothing
    );
    // Behind in the same history: nothing to cut.
    let behind = EpochFileCache::in_memory([(1, 0), (2, 1000)]);
    assert_eq!(
        consistent_point(&behind, 3000, &master, 6000),
        Truncation::To(3000)
    );
    // The deposed master of epoch 2 wrote past where epoch 3 began on the new master.
    assert_eq!(
        consistent_point(&behind, 5600, &master, 6000),
        Truncation::To(5000)
    );
    // Ahead of the master in its own epoch: cut back to the master's end.
    let ahead = EpochFileCache::in_memory([(1, 0), (2, 1000), (3, 5000)]);
    assert_eq!(
        consistent_point(&ahead, 6400, &master, 6000),
        Truncation::To(6000)
    );
    // Another history altogether.
    let stranger = EpochFileCache::in_memory([(7, 0)]);
    assert_eq!(
        consistent_point(&stranger, 100, &master, 6000),
        Truncation::Diverged
    );
}
