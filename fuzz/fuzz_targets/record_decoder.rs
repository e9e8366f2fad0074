//! The record codec and crash recovery on hostile bytes. `decode` must never panic and may only
//! accept a record that decodes identically from exactly its own bytes with a matching CRC.
//! Recovery of a store whose segments hold arbitrary bytes must never panic, and every record
//! the recovered store then serves must pass the same validation recovery applies (size, magic,
//! length, CRC, physical offset).

#![no_main]

use std::fs;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use rocketha_core::commitlog::mapped_file::segment_name;
use rocketha_core::commitlog::record::{self, Peeked};
use rocketha_core::{MessageStore, StoreConfig};

/// The smallest segment size a store accepts: keeps each run cheap.
const SEGMENT: usize = 64 * 1024;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Leaves the `abort` marker, as a crash would: recovery scans from the checkpoint.
    crashed: bool,
    /// Opens read-only (a reader attached to a live store) instead of recovering.
    read_only: bool,
    /// Where the bytes start in the first segment, so records can sit anywhere.
    at: u16,
    /// Patches the CRC and physical offset of every record that otherwise decodes, so the
    /// fuzzer reaches past the checks it cannot solve by mutation into deeper recovery paths.
    fix_up: bool,
    /// The second segment starts with these bytes (none: a single segment).
    second: Option<Vec<u8>>,
    first: Vec<u8>,
}

fn check_decode(data: &[u8]) {
    let Ok(Peeked::Record(r)) = record::decode(data, true) else {
        return;
    };
    let total = usize::try_from(r.total_size).expect("accepted size is positive");
    assert!(total <= data.len());
    assert_eq!(record::body_crc(r.body), r.body_crc);
    assert_eq!(
        record::decode(&data[..total], true),
        Ok(Peeked::Record(r.clone()))
    );
    assert_eq!(record::decode(data, false), Ok(Peeked::Record(r)));
}

/// Field positions in the record layout (see `commitlog::record`).
const BODYCRC_AT: usize = 8;
const PHYSICALOFFSET_AT: usize = 28;

fn segment(bytes: &[u8], at: usize, start: u64, fix_up: bool) -> Vec<u8> {
    let mut out = vec![0u8; SEGMENT];
    let n = bytes.len().min(SEGMENT - at);
    out[at..at + n].copy_from_slice(&bytes[..n]);
    let mut pos = at;
    while fix_up {
        let Ok(Peeked::Record(r)) = record::decode(&out[pos..], false) else {
            break;
        };
        let (crc, total) = (record::body_crc(r.body), r.total_size as usize);
        out[pos + BODYCRC_AT..][..4].copy_from_slice(&crc.to_be_bytes());
        let offset = (start + pos as u64) as i64;
        out[pos + PHYSICALOFFSET_AT..][..8].copy_from_slice(&offset.to_be_bytes());
        pos += total;
    }
    out
}

fn check_recovery(input: &Input) {
    let dir = tempfile::tempdir().expect("temp dir");
    let log_dir = dir.path().join("commitlog");
    fs::create_dir_all(&log_dir).expect("commitlog dir");
    let at = usize::from(input.at) % SEGMENT;
    let first = segment(&input.first, at, 0, input.fix_up);
    fs::write(log_dir.join(segment_name(0)), first).expect("segment");
    if let Some(second) = &input.second {
        let start = SEGMENT as u64;
        let data = segment(second, 0, start, input.fix_up);
        fs::write(log_dir.join(segment_name(start)), data).expect("segment");
    }
    if input.crashed {
        fs::write(dir.path().join("abort"), b"").expect("abort marker");
    }
    let mut config = StoreConfig::new(dir.path());
    config.mapped_file_size = SEGMENT as u64;
    config.read_only = input.read_only;
    // Refusing to open is a valid outcome for garbage; panicking is not.
    let Ok(store) = MessageStore::open(config) else {
        return;
    };
    let (min, max) = (store.min_offset(), store.max_offset());
    assert!(min <= max);
    let mut end = min;
    for rec in store.iter_from(min, true) {
        let rec = rec.expect("a recovered store serves only valid records");
        let view = rec.view();
        assert_eq!(view.physical_offset, rec.offset() as i64);
        assert_eq!(record::body_crc(view.body), view.body_crc);
        end = rec.offset() + view.total_size as u64;
        assert!(end <= max, "record past the recovered max offset");
    }
    for (topic, queue_id, low, high) in store.queues() {
        assert!(low <= high);
        let served = store
            .get_messages(&topic, queue_id, low, usize::MAX)
            .expect("consume queue read");
        for (_, rec) in served {
            assert!(rec.offset() < end);
        }
    }
    store.close().expect("close");
}

fuzz_target!(|input: Input| {
    check_decode(&input.first);
    if let Some(second) = &input.second {
        check_decode(second);
    }
    check_recovery(&input);
});
