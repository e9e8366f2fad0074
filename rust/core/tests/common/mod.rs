//! Helpers the replication tests share.

use std::time::{Duration, Instant};

use rocketha_core::MessageStore;

/// The commit log's bytes from `from` to the end.
pub fn log_bytes_from(store: &MessageStore, from: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut off = from;
    while let Some(slice) = store.read_raw(off, usize::MAX) {
        out.extend_from_slice(slice.bytes());
        off += slice.len() as u64;
    }
    out
}

/// Polls `f` until true; the generous deadline only turns a hang into a failure.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
