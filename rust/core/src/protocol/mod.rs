//! What every network layer shares, as RocketMQ's `common` and `remoting.protocol` packages:
//! the bodies ([`body`]), the atomic config files ([`config_file`]), the heartbeat ([`heartbeat`]), the queue locks ([`lock_batch`]), the fastjson-compatible JSON
//! ([`json`]), the length-prefixed byte reader ([`reader`]), and the clock and checksum that
//! records and registrations carry. It depends on nothing else in the crate, so the store,
//! remoting, the name server, the broker, the ACL and the clients all build on it.

pub(crate) mod body;
pub(crate) mod config_file;
pub(crate) mod connection;
pub(crate) mod heartbeat;
pub(crate) mod json;
pub(crate) mod lock_batch;
pub(crate) mod queue_stats;
pub(crate) mod reader;

/// `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`: the template a producer names as
/// `defaultTopic` when it sends to a topic nobody created (`autoCreateTopicEnable`).
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`: a consumer group's retry topic.
pub(crate) const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// `MixAll.DLQ_GROUP_TOPIC_PREFIX`: a consumer group's dead-letter topic.
pub(crate) const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock milliseconds since the epoch, as Java's `System.currentTimeMillis()`: what
/// records store as born and store timestamps, and what heartbeats and registrations carry.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The local calendar time of `secs` since the epoch (`deleteWhen` hours, index file names).
pub(crate) fn local_time(secs: i64) -> libc::tm {
    let now = secs as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: localtime_r writes into our buffer and is thread-safe; a zeroed `tm` stays if it
    // fails.
    unsafe { libc::localtime_r(&now, tm.as_mut_ptr()) };
    // SAFETY: zero-initialised, and possibly filled in by localtime_r.
    unsafe { tm.assume_init() }
}

/// `UtilAll.crc32` as RocketMQ stores it: CRC-32 with the sign bit cleared, over a message
/// body (a record's BODYCRC) or a register body (`bodyCrc32`).
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}
