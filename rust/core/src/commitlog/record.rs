//! RocketMQ's message record layout (V1, and V2 for long topics), byte for byte.
//!
//! ```text
//! TOTALSIZE i32 | MAGIC i32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64 |
//! PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST 8/20 | STORETIMESTAMP i64 |
//! STOREHOST 8/20 | RECONSUMETIMES i32 | PREPARED_TX_OFFSET i64 | BODYLEN i32 | body |
//! TOPICLEN u8 (V1) / i16 (V2) | topic | PROPLEN i16 | properties
//! ```
//! All integers big-endian, as Java's `ByteBuffer` writes them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::error::RecordError;

pub(crate) const MAGIC_V1: i32 = 0xDAA320A7_u32 as i32;
pub(crate) const MAGIC_V2: i32 = 0xDAA320AB_u32 as i32;
/// Marks the padding that ends a segment when the next record does not fit.
pub(crate) const BLANK_MAGIC: i32 = 0xCBD43194_u32 as i32;
/// A record fits only if this much room is left after it, so every full segment ends in a blank.
pub(crate) const END_FILE_MIN_BLANK_LENGTH: usize = 8;
/// Bytes of a V1 record with IPv4 hosts, an empty body, topic and properties.
pub(crate) const FIXED_OVERHEAD_V1: usize = 91;
/// `maxMessageSize` in RocketMQ: the largest body a producer may send.
pub(crate) const MAX_BODY_SIZE: usize = 4 * 1024 * 1024;
pub(crate) const MAX_TOPIC_LEN: usize = i16::MAX as usize;
pub(crate) const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

pub(crate) const SYSFLAG_BORNHOST_V6: i32 = 1 << 4;
pub(crate) const SYSFLAG_STOREHOST_V6: i32 = 1 << 5;

pub(crate) const NAME_VALUE_SEPARATOR: u8 = 1;
pub(crate) const PROPERTY_SEPARATOR: u8 = 2;
pub const PROPERTY_TAGS: &str = "TAGS";
pub const PROPERTY_KEYS: &str = "KEYS";
/// RocketMQ joins several keys of one message with a space.
pub const KEY_SEPARATOR: &str = " ";

const TOTALSIZE_AT: usize = 0;
const MAGIC_AT: usize = 4;
const BODYCRC_AT: usize = 8;
const QUEUEID_AT: usize = 12;
const FLAG_AT: usize = 16;
const QUEUEOFFSET_AT: usize = 20;
const PHYSICALOFFSET_AT: usize = 28;
const SYSFLAG_AT: usize = 36;
const BORNTIMESTAMP_AT: usize = 40;
const BORNHOST_AT: usize = 48;

pub use crate::protocol::body_crc;

/// Java's `String.hashCode()` over UTF-16 code units: the tag hash a consume queue stores.
pub(crate) fn tags_hash_code(tags: &str) -> i64 {
    let mut h: i32 = 0;
    for unit in tags.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h as i64
}

/// `TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`: where RocketMQ parks delayed messages until due.
pub(crate) const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// `MessageConst.PROPERTY_DELAY_TIME_LEVEL`.
pub(crate) const PROPERTY_DELAY_TIME_LEVEL: &str = "DELAY";

/// A consume queue entry's tag code, as RocketMQ's `CommitLog.checkMessageAndReturnSize`
/// computes it: the hash of the TAGS property, except for a delayed message in
/// SCHEDULE_TOPIC_XXXX, whose code is its delivery time (what the ScheduleMessageService scans
/// the queue by), the store time plus its level's delay in `delay_levels` (`messageDelayLevel`
/// in ms; a level past the last counts as the last).
pub(crate) fn tags_code(
    topic: &[u8],
    properties: &[u8],
    store_timestamp: i64,
    delay_levels: &[i64],
) -> i64 {
    if topic == SCHEDULE_TOPIC.as_bytes() {
        let level = find_property(properties, PROPERTY_DELAY_TIME_LEVEL)
            .and_then(|l| std::str::from_utf8(l).ok()?.parse::<usize>().ok());
        if let (Some(level @ 1..), Some(&last)) = (level, delay_levels.last()) {
            let delay = delay_levels.get(level - 1).copied().unwrap_or(last);
            return store_timestamp.saturating_add(delay);
        }
    }
    find_property(properties, PROPERTY_TAGS)
        .map_or(0, |t| tags_hash_code(&String::from_utf8_lossy(t)))
}

/// `properties` with the pairs of `set` taking their values (in place, or appended when new)
/// and the names in `remove` gone: how the broker stamps a message it moves (`putProperty`,
/// `clearProperty`) without decoding the rest.
pub(crate) fn edit_properties(properties: &[u8], set: &[(&str, &str)], remove: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(properties.len() + 64);
    let mut pending: Vec<&(&str, &str)> = set.iter().collect();
    let push = |out: &mut Vec<u8>, name: &[u8], value: &[u8]| {
        out.extend_from_slice(name);
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(value);
        out.push(PROPERTY_SEPARATOR);
    };
    for (name, value) in property_pairs(properties) {
        if remove.iter().any(|r| r.as_bytes() == name) {
            continue;
        }
        match pending.iter().position(|(n, _)| n.as_bytes() == name) {
            Some(at) => push(&mut out, name, pending.swap_remove(at).1.as_bytes()),
            None if set.iter().any(|(n, _)| n.as_bytes() == name) => {}
            None => push(&mut out, name, value),
        }
    }
    for (name, value) in set {
        if pending.iter().any(|(n, _)| n == name) {
            push(&mut out, name.as_bytes(), value.as_bytes());
        }
    }
    out
}

/// Encodes `key\x01value\x02` pairs, refusing separator bytes inside names or values.
pub fn encode_properties<'a, I>(pairs: I) -> Result<Vec<u8>, RecordError>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut out = Vec::new();
    for (name, value) in pairs {
        for (what, text) in [("name", name), ("value", value)] {
            if text
                .bytes()
                .any(|b| b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR)
            {
                return Err(RecordError::PropertySeparator {
                    what,
                    name: name.to_owned(),
                });
            }
        }
        if name.is_empty() {
            return Err(RecordError::EmptyPropertyName);
        }
        out.extend_from_slice(name.as_bytes());
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(value.as_bytes());
        out.push(PROPERTY_SEPARATOR);
    }
    if out.len() > MAX_PROPERTIES_LEN {
        return Err(RecordError::PropertiesTooLong(out.len()));
    }
    Ok(out)
}

/// The `(name, value)` byte pairs of an encoded properties block, borrowed, in order.
pub(crate) fn property_pairs(raw: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    raw.split(|&b| b == PROPERTY_SEPARATOR)
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let at = pair.iter().position(|&b| b == NAME_VALUE_SEPARATOR)?;
            Some((&pair[..at], &pair[at + 1..]))
        })
}

/// Splits an encoded properties block back into pairs (lossy UTF-8, as Java would decode it).
pub fn decode_properties(raw: &[u8]) -> Vec<(String, String)> {
    property_pairs(raw)
        .map(|(name, value)| {
            (
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            )
        })
        .collect()
}

/// Finds one property's value in an encoded block without decoding the others.
pub fn find_property<'a>(raw: &'a [u8], name: &str) -> Option<&'a [u8]> {
    raw.split(|&b| b == PROPERTY_SEPARATOR).find_map(|pair| {
        let at = pair.iter().position(|&b| b == NAME_VALUE_SEPARATOR)?;
        (&pair[..at] == name.as_bytes()).then(|| &pair[at + 1..])
    })
}

/// What a producer supplies; the store fills in offsets and the store timestamp.
#[derive(Debug, Clone, Copy)]
pub struct MessageDraft<'a> {
    pub topic: &'a str,
    pub body: &'a [u8],
    /// Already encoded with [`encode_properties`].
    pub properties: &'a [u8],
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_tx_offset: i64,
}

fn host_len(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => 8,
        SocketAddr::V6(_) => 20,
    }
}

impl MessageDraft<'_> {
    /// Checks what RocketMQ's producer and broker check, before any byte is written.
    pub(crate) fn validate(&self) -> Result<(), RecordError> {
        if self.topic.is_empty() {
            return Err(RecordError::EmptyTopic);
        }
        if self.topic.len() > MAX_TOPIC_LEN {
            return Err(RecordError::TopicTooLong(self.topic.len()));
        }
        // RocketMQ's topic charset; it also keeps consume queue paths inside the store.
        if let Some(bad) = self
            .topic
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')))
        {
            return Err(RecordError::BadTopicChar(bad));
        }
        if self.body.len() > MAX_BODY_SIZE {
            return Err(RecordError::BodyTooLarge(self.body.len()));
        }
        if self.properties.len() > MAX_PROPERTIES_LEN {
            return Err(RecordError::PropertiesTooLong(self.properties.len()));
        }
        if self.queue_id < 0 {
            return Err(RecordError::NegativeQueueId(self.queue_id));
        }
        Ok(())
    }

    fn uses_v2(&self) -> bool {
        self.topic.len() > i8::MAX as usize
    }

    /// Size of the encoded record with this store host.
    pub(crate) fn encoded_len(&self, store_host: &SocketAddr) -> usize {
        let topic_len_field = if self.uses_v2() { 2 } else { 1 };
        FIXED_OVERHEAD_V1 - 1 - 16
            + host_len(&self.born_host)
            + host_len(store_host)
            + topic_len_field
            + self.body.len()
            + self.topic.len()
            + self.properties.len()
    }

    /// Writes the record into `out`, which must be exactly `encoded_len` bytes.
    pub(crate) fn encode_into(
        &self,
        out: &mut [u8],
        queue_offset: i64,
        physical_offset: i64,
        store_timestamp: i64,
        store_host: &SocketAddr,
    ) {
        let mut w = Writer { buf: out, at: 0 };
        let total = w.buf.len() as i32;
        let mut sys_flag = self.sys_flag & !(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6);
        if self.born_host.is_ipv6() {
            sys_flag |= SYSFLAG_BORNHOST_V6;
        }
        if store_host.is_ipv6() {
            sys_flag |= SYSFLAG_STOREHOST_V6;
        }
        w.i32(total);
        w.i32(if self.uses_v2() { MAGIC_V2 } else { MAGIC_V1 });
        w.i32(body_crc(self.body));
        w.i32(self.queue_id);
        w.i32(self.flag);
        w.i64(queue_offset);
        w.i64(physical_offset);
        w.i32(sys_flag);
        w.i64(self.born_timestamp);
        w.host(&self.born_host);
        w.i64(store_timestamp);
        w.host(store_host);
        w.i32(self.reconsume_times);
        w.i64(self.prepared_tx_offset);
        w.i32(self.body.len() as i32);
        w.bytes(self.body);
        if self.uses_v2() {
            w.bytes(&(self.topic.len() as i16).to_be_bytes());
        } else {
            w.bytes(&[self.topic.len() as u8]);
        }
        w.bytes(self.topic.as_bytes());
        w.bytes(&(self.properties.len() as i16).to_be_bytes());
        w.bytes(self.properties);
        debug_assert_eq!(w.at, w.buf.len());
    }
}

struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    #[inline]
    fn bytes(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
    #[inline]
    fn i32(&mut self, v: i32) {
        self.bytes(&v.to_be_bytes());
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.bytes(&v.to_be_bytes());
    }
    fn host(&mut self, addr: &SocketAddr) {
        match addr.ip() {
            IpAddr::V4(ip) => self.bytes(&ip.octets()),
            IpAddr::V6(ip) => self.bytes(&ip.octets()),
        }
        self.i32(addr.port() as i32);
    }
}

/// A record decoded in place: every variable-length field borrows from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordView<'a> {
    pub total_size: i32,
    pub(crate) magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_tx_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

impl RecordView<'_> {
    /// The offset message id: store host IPv4 + port + commit log offset, upper-case hex.
    #[cfg(test)]
    pub(crate) fn msg_id(&self) -> String {
        msg_id(&self.store_host, self.physical_offset)
    }

    pub(crate) fn tags(&self) -> Option<&[u8]> {
        find_property(self.properties, PROPERTY_TAGS)
    }

    pub(crate) fn tags_code(&self, delay_levels: &[i64]) -> i64 {
        tags_code(
            self.topic,
            self.properties,
            self.store_timestamp,
            delay_levels,
        )
    }
}

pub fn msg_id(store_host: &SocketAddr, physical_offset: i64) -> String {
    let mut out = Vec::with_capacity(56);
    msg_id_into(&mut out, store_host, physical_offset);
    // Only hex digits were written.
    String::from_utf8_lossy(&out).into_owned()
}

/// Appends the offset message id to `out` without allocating: for columnar readers.
pub(crate) fn msg_id_into(out: &mut Vec<u8>, store_host: &SocketAddr, physical_offset: i64) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut hex = |raw: &[u8]| {
        for &b in raw {
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        }
    };
    match store_host.ip() {
        IpAddr::V4(ip) => hex(&ip.octets()),
        IpAddr::V6(ip) => hex(&ip.octets()),
    }
    hex(&(store_host.port() as i32).to_be_bytes());
    hex(&physical_offset.to_be_bytes());
}

/// What the bytes at a record position hold.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) enum Peeked<'a> {
    Record(RecordView<'a>),
    /// End-of-segment padding of this many bytes.
    Blank(usize),
    /// Zeroed space: nothing was ever written here.
    End,
}

/// A record's body, topic and properties, as [`Reader::variable_part`] reads them.
struct VariablePart<'a> {
    body: &'a [u8],
    topic: &'a [u8],
    properties: &'a [u8],
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// The record's variable-length part: body, topic (a 2-byte length from V2 on) and
    /// properties.
    #[inline]
    fn variable_part(&mut self, magic: i32) -> Result<VariablePart<'a>, RecordError> {
        let body_len = self.i32()?;
        if body_len < 0 {
            return Err(RecordError::BadLength("body", body_len as i64));
        }
        let body = self.take(body_len as usize)?;
        let topic_len = if magic == MAGIC_V2 {
            self.i16()? as i64
        } else {
            self.take(1)?[0] as i64
        };
        if topic_len <= 0 {
            return Err(RecordError::BadLength("topic", topic_len));
        }
        let topic = self.take(topic_len as usize)?;
        let prop_len = self.i16()?;
        if prop_len < 0 {
            return Err(RecordError::BadLength("properties", prop_len as i64));
        }
        let properties = self.take(prop_len as usize)?;
        Ok(VariablePart {
            body,
            topic,
            properties,
        })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self.at.checked_add(n).ok_or(RecordError::Truncated)?;
        let out = self.buf.get(self.at..end).ok_or(RecordError::Truncated)?;
        self.at = end;
        Ok(out)
    }
    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().unwrap_or_default(),
        ))
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
    fn host(&mut self, v6: bool) -> Result<SocketAddr, RecordError> {
        let ip = if v6 {
            let raw: [u8; 16] = self.take(16)?.try_into().unwrap_or_default();
            IpAddr::from(raw)
        } else {
            let raw: [u8; 4] = self.take(4)?.try_into().unwrap_or_default();
            IpAddr::V4(Ipv4Addr::from(raw))
        };
        let port = self.i32()?;
        Ok(SocketAddr::new(ip, port as u16))
    }
}

/// Reads the 8 bytes that say what starts here, without needing the rest.
pub(crate) fn peek_size_magic(buf: &[u8]) -> Option<(i32, i32)> {
    let head = buf.get(..8)?;
    Some((
        i32::from_be_bytes([head[0], head[1], head[2], head[3]]),
        i32::from_be_bytes([head[4], head[5], head[6], head[7]]),
    ))
}

/// Decodes the record at the start of `buf` (`buf` may run past it).
///
/// `check_crc` also verifies the body CRC: recovery and readers of a possibly torn tail need
/// it, replicas dispatching bytes already checked by their master do not.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn decode(buf: &[u8], check_crc: bool) -> Result<Peeked<'_>, RecordError> {
    let (total, magic) = peek_size_magic(buf).ok_or(RecordError::Truncated)?;
    if magic == BLANK_MAGIC {
        if total < END_FILE_MIN_BLANK_LENGTH as i32 {
            return Err(RecordError::BadSize(total));
        }
        return Ok(Peeked::Blank(total as usize));
    }
    if total == 0 && magic == 0 {
        return Ok(Peeked::End);
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(RecordError::BadMagic(magic));
    }
    if total < (FIXED_OVERHEAD_V1 - 1) as i32 {
        return Err(RecordError::BadSize(total));
    }
    let record = buf.get(..total as usize).ok_or(RecordError::Truncated)?;
    let mut r = Reader {
        buf: record,
        at: BODYCRC_AT,
    };
    let crc = r.i32()?;
    debug_assert_eq!(r.at, QUEUEID_AT);
    let queue_id = r.i32()?;
    debug_assert_eq!(r.at, FLAG_AT);
    let flag = r.i32()?;
    debug_assert_eq!(r.at, QUEUEOFFSET_AT);
    let queue_offset = r.i64()?;
    debug_assert_eq!(r.at, PHYSICALOFFSET_AT);
    let physical_offset = r.i64()?;
    debug_assert_eq!(r.at, SYSFLAG_AT);
    let sys_flag = r.i32()?;
    debug_assert_eq!(r.at, BORNTIMESTAMP_AT);
    let born_timestamp = r.i64()?;
    debug_assert_eq!(r.at, BORNHOST_AT);
    let born_host = r.host(sys_flag & SYSFLAG_BORNHOST_V6 != 0)?;
    let store_timestamp = r.i64()?;
    let store_host = r.host(sys_flag & SYSFLAG_STOREHOST_V6 != 0)?;
    let reconsume_times = r.i32()?;
    let prepared_tx_offset = r.i64()?;
    let VariablePart {
        body,
        topic,
        properties,
    } = r.variable_part(magic)?;
    check_length_and_crc(total, r.at, check_crc, body, crc)?;
    Ok(Peeked::Record(RecordView {
        total_size: total,
        magic,
        body_crc: crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_tx_offset,
        body,
        topic,
        properties,
    }))
}

/// The fields must add up to the stored total size, and the body match its CRC when asked.
#[inline]
fn check_length_and_crc(
    total: i32,
    computed: usize,
    check_crc: bool,
    body: &[u8],
    crc: i32,
) -> Result<(), RecordError> {
    if computed != total as usize {
        return Err(RecordError::LengthMismatch {
            total: total as usize,
            computed,
        });
    }
    if check_crc && body_crc(body) != crc {
        return Err(RecordError::BadCrc {
            stored: crc,
            computed: body_crc(body),
        });
    }
    Ok(())
}

/// Verifies a decoded record's body CRC. `accept_zero` (`haAcceptZeroBodyCrc`) also takes a
/// stored 0 as "never computed": some peers' batch encoders leave BODYCRC unset and rely on the
/// broker to fill it in. Only exactly 0; any other mismatch is still an error.
pub(crate) fn check_body_crc(r: &RecordView<'_>, accept_zero: bool) -> Result<(), RecordError> {
    let computed = body_crc(r.body);
    if r.body_crc == computed || (accept_zero && r.body_crc == 0) {
        return Ok(());
    }
    Err(RecordError::BadCrc {
        stored: r.body_crc,
        computed,
    })
}

/// Checks bytes a replica received before they are published. `buf` starts at a record
/// boundary `base`; `segment_end` is where its segment ends. Every complete record must decode
/// with a valid CRC at its own physical offset, a blank must pad exactly to the segment end, and
/// a trailing partial record must have a plausible size and magic.
///
/// Appends every complete record to `accepted` and returns where the first incomplete one
/// starts (`segment_end` after the blank), or the offset and reason of the first problem.
/// `accept_zero_crc`: see [`check_body_crc`].
pub(crate) fn check_incoming<'a>(
    buf: &'a [u8],
    base: u64,
    segment_end: u64,
    accept_zero_crc: bool,
    accepted: &mut Vec<RecordView<'a>>,
) -> Result<u64, (u64, RecordError)> {
    let mut pos = 0usize;
    while let Some((size, magic)) = peek_size_magic(&buf[pos..]) {
        let offset = base + pos as u64;
        let room = segment_end - offset;
        if magic == BLANK_MAGIC {
            return if size as u64 == room {
                Ok(segment_end)
            } else {
                Err((offset, RecordError::BadSize(size)))
            };
        }
        if magic != MAGIC_V1 && magic != MAGIC_V2 {
            return Err((offset, RecordError::BadMagic(magic)));
        }
        // A record always leaves room for the blank that ends its segment.
        if size < (FIXED_OVERHEAD_V1 - 1) as i32
            || size as u64 + END_FILE_MIN_BLANK_LENGTH as u64 > room
        {
            return Err((offset, RecordError::BadSize(size)));
        }
        let size = size as usize;
        if buf.len() - pos < size {
            break;
        }
        let checked = decode(&buf[pos..], false).and_then(|p| match p {
            Peeked::Record(r) => check_body_crc(&r, accept_zero_crc).map(|()| Peeked::Record(r)),
            other => Ok(other),
        });
        match checked {
            Ok(Peeked::Record(r)) if r.physical_offset == offset as i64 => {
                pos += size;
                accepted.push(r);
            }
            Ok(Peeked::Record(r)) => {
                return Err((
                    offset,
                    RecordError::BadLength("physical offset field", r.physical_offset),
                ))
            }
            Ok(_) => return Err((offset, RecordError::BadMagic(magic))),
            Err(e) => return Err((offset, e)),
        }
    }
    Ok(base + pos as u64)
}

/// Writes the END-OF-FILE blank header at the start of `out` (the rest stays as it is).
pub(crate) fn encode_blank(out: &mut [u8], remaining: usize) {
    out[TOTALSIZE_AT..4].copy_from_slice(&(remaining as i32).to_be_bytes());
    out[MAGIC_AT..8].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A small record to corrupt in various ways.
    fn payload_draft() -> MessageDraft<'static> {
        MessageDraft {
            topic: "T",
            body: b"payload",
            properties: b"",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: host(1),
            reconsume_times: 0,
            prepared_tx_offset: 0,
        }
    }

    /// The golden vector is assembled field by field from SPEC §1, never by the encoder.
    #[test]
    fn golden_v1_record() {
        let props = encode_properties([("TAGS", "tagA")]).unwrap();
        let draft = MessageDraft {
            topic: "T",
            body: b"hi",
            properties: &props,
            queue_id: 3,
            flag: 7,
            sys_flag: 0,
            born_timestamp: 0x0102030405060708,
            born_host: SocketAddr::from(([10, 0, 0, 1], 4242)),
            reconsume_times: 1,
            prepared_tx_offset: 0,
        };
        let store = SocketAddr::from(([192, 168, 1, 2], 10911));
        let mut expected = Vec::new();
        let total: i32 = 91 + 2 + 1 + props.len() as i32;
        expected.extend_from_slice(&total.to_be_bytes());
        expected.extend_from_slice(&[0xDA, 0xA3, 0x20, 0xA7]);
        let crc = crc32fast::hash(b"hi") & 0x7FFF_FFFF;
        expected.extend_from_slice(&crc.to_be_bytes());
        expected.extend_from_slice(&3i32.to_be_bytes());
        expected.extend_from_slice(&7i32.to_be_bytes());
        expected.extend_from_slice(&42i64.to_be_bytes()); // queue offset
        expected.extend_from_slice(&4096i64.to_be_bytes()); // physical offset
        expected.extend_from_slice(&0i32.to_be_bytes()); // sysflag
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        expected.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0x10, 0x92]);
        expected.extend_from_slice(&99i64.to_be_bytes()); // store timestamp
        expected.extend_from_slice(&[192, 168, 1, 2, 0, 0, 0x2A, 0x9F]);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&0i64.to_be_bytes());
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(b"hi");
        expected.push(1);
        expected.push(b'T');
        expected.extend_from_slice(&(props.len() as i16).to_be_bytes());
        expected.extend_from_slice(b"TAGS\x01tagA\x02");

        let mut out = vec![0u8; draft.encoded_len(&store)];
        draft.encode_into(&mut out, 42, 4096, 99, &store);
        assert_eq!(out, expected);
        assert_eq!(
            msg_id(&store, 4096),
            "C0A801020000"
                .chars()
                .chain("2A9F0000000000001000".chars())
                .collect::<String>()
        );
    }

    #[test]
    fn long_topic_uses_v2_with_two_byte_length() {
        let topic = "t".repeat(200);
        let draft = MessageDraft {
            topic: &topic,
            body: b"",
            ..payload_draft()
        };
        let mut out = vec![0u8; draft.encoded_len(&host(2))];
        assert_eq!(out.len(), 92 + 200);
        draft.encode_into(&mut out, 0, 0, 0, &host(2));
        assert_eq!(&out[4..8], &[0xDA, 0xA3, 0x20, 0xAB]);
        assert_eq!(&out[88..90], &200i16.to_be_bytes());
        match decode(&out, true).unwrap() {
            Peeked::Record(r) => assert_eq!(r.topic, topic.as_bytes()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn delayed_messages_are_indexed_by_delivery_time() {
        let levels = [1_000, 5_000, 10_000];
        let props = encode_properties([("DELAY", "3"), ("TAGS", "x")]).unwrap();
        assert_eq!(
            tags_code(b"SCHEDULE_TOPIC_XXXX", &props, 1_000, &levels),
            11_000
        );
        let past_max = encode_properties([("DELAY", "99")]).unwrap();
        assert_eq!(
            tags_code(b"SCHEDULE_TOPIC_XXXX", &past_max, 0, &levels),
            10_000
        );
        assert_eq!(
            tags_code(b"orders", &props, 1_000, &levels),
            tags_hash_code("x"),
            "only the schedule topic"
        );
        let level_zero = encode_properties([("DELAY", "0")]).unwrap();
        assert_eq!(
            tags_code(b"SCHEDULE_TOPIC_XXXX", &level_zero, 5, &levels),
            0
        );
    }

    #[test]
    fn edited_properties_keep_the_others_in_order() {
        let props = encode_properties([("A", "1"), ("DELAY", "3"), ("B", "2")]).unwrap();
        let edited = edit_properties(&props, &[("B", "9"), ("C", "new")], &["DELAY"]);
        assert_eq!(
            decode_properties(&edited),
            [("A", "1"), ("B", "9"), ("C", "new")].map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        let duplicated = encode_properties([("B", "1"), ("B", "2")]).unwrap();
        let once = edit_properties(&duplicated, &[("B", "3")], &[]);
        assert_eq!(decode_properties(&once), [("B".to_owned(), "3".to_owned())]);
        assert!(edit_properties(b"", &[], &["X"]).is_empty());
    }

    #[test]
    fn java_hash_code() {
        assert_eq!(tags_hash_code(""), 0);
        assert_eq!(tags_hash_code("TagA"), 2598919);
        // Overflows i32 like Java does; values from a JVM.
        assert_eq!(tags_hash_code("a longer tag value"), -1_517_477_869);
        assert_eq!(tags_hash_code("\u{e9}t\u{e9}"), 227_742);
    }

    #[test]
    fn separators_in_properties_are_refused() {
        assert!(encode_properties([("a\u{1}", "b")]).is_err());
        assert!(encode_properties([("a", "b\u{2}")]).is_err());
    }

    #[test]
    fn corrupt_bytes_are_detected() {
        let draft = payload_draft();
        let mut out = vec![0u8; draft.encoded_len(&host(2))];
        draft.encode_into(&mut out, 0, 0, 0, &host(2));
        let mut flipped = out.clone();
        flipped[90] ^= 0x40;
        assert!(matches!(
            decode(&flipped, true),
            Err(RecordError::BadCrc { .. })
        ));
        assert!(decode(&flipped, false).is_ok());
        assert!(matches!(
            decode(&out[..out.len() - 1], true),
            Err(RecordError::Truncated)
        ));
    }

    #[test]
    fn incoming_bytes_are_checked_record_by_record() {
        let draft = payload_draft();
        let len = draft.encoded_len(&host(2));
        let mut log = vec![0u8; 2 * len];
        draft.encode_into(&mut log[..len], 0, 1000, 0, &host(2));
        draft.encode_into(&mut log[len..], 1, 1000 + len as i64, 0, &host(2));
        let check = |buf: &[u8], base: u64, end: u64| {
            let mut accepted = Vec::new();
            check_incoming(buf, base, end, false, &mut accepted).map(|next| (next, accepted.len()))
        };
        assert_eq!(check(&log, 1000, 1 << 20), Ok((1000 + 2 * len as u64, 2)));
        // Any prefix is fine: the rest of a record may come with the next frame.
        for cut in 0..log.len() {
            let complete = cut / len;
            assert_eq!(
                check(&log[..cut], 1000, 1 << 20),
                Ok((1000 + (complete * len) as u64, complete)),
                "cut {cut}"
            );
        }
        // A blank pads to the end of the segment: the next record starts in the next one.
        let mut padded = log.clone();
        padded.resize(3 * len, 0);
        encode_blank(&mut padded[2 * len..], len);
        let end = 1000 + 3 * len as u64;
        assert_eq!(check(&padded, 1000, end), Ok((end, 2)));
        let mut flipped = log.clone();
        flipped[len + 90] ^= 1;
        assert!(
            matches!(check(&flipped, 1000, 1 << 20), Err((o, RecordError::BadCrc { .. })) if o == 1000 + len as u64)
        );
        // A size grown in flight runs into the next header: caught.
        let mut grown = log.clone();
        grown[3] = grown[3].wrapping_add(12);
        assert!(check(&grown, 1000, 1 << 20).is_err());
        // Wrong position: the physical offset field disagrees.
        assert!(check(&log, 2000, 1 << 20).is_err());
        // A record that would not leave room for the end-of-file blank.
        assert!(check(&log, 1000, 1000 + len as u64).is_err());
    }

    #[test]
    fn zero_body_crc_is_accepted_only_when_asked_and_only_zero() {
        let draft = payload_draft();
        let mut rec = vec![0u8; draft.encoded_len(&host(2))];
        draft.encode_into(&mut rec, 0, 0, 0, &host(2));
        rec[BODYCRC_AT..BODYCRC_AT + 4].copy_from_slice(&0i32.to_be_bytes());
        let check =
            |buf: &[u8], accept: bool| check_incoming(buf, 0, 1 << 20, accept, &mut Vec::new());
        assert!(matches!(
            check(&rec, false),
            Err((0, RecordError::BadCrc { stored: 0, .. }))
        ));
        assert_eq!(check(&rec, true), Ok(rec.len() as u64));
        // Any other wrong CRC is still refused, opt-in or not.
        rec[BODYCRC_AT + 3] = 1;
        assert!(matches!(
            check(&rec, true),
            Err((0, RecordError::BadCrc { stored: 1, .. }))
        ));
    }

    proptest! {
        #[test]
        fn round_trip(
            topic in "[a-zA-Z0-9_%|-]{1,300}",
            body in proptest::collection::vec(any::<u8>(), 0..2048),
            props in proptest::collection::vec(("[a-zA-Z]{1,8}", "[ -~]{0,16}"), 0..4),
            queue_id in 0i32..1024,
            flag in any::<i32>(),
            queue_offset in 0i64..i64::MAX,
            v6 in any::<bool>(),
        ) {
            let props = encode_properties(props.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
            let born: SocketAddr = if v6 { "[::1]:99".parse().unwrap() } else { host(99) };
            let draft = MessageDraft {
                topic: &topic, body: &body, properties: &props, queue_id, flag,
                sys_flag: 0, born_timestamp: 5, born_host: born, reconsume_times: 2,
                prepared_tx_offset: 0,
            };
            let store = host(10911);
            let mut out = vec![0u8; draft.encoded_len(&store)];
            draft.encode_into(&mut out, queue_offset, 777, 6, &store);
            let Peeked::Record(r) = decode(&out, true).unwrap() else { panic!() };
            prop_assert_eq!(r.topic, topic.as_bytes());
            prop_assert_eq!(r.body, &body[..]);
            prop_assert_eq!(r.properties, &props[..]);
            prop_assert_eq!(r.queue_id, queue_id);
            prop_assert_eq!(r.flag, flag);
            prop_assert_eq!(r.queue_offset, queue_offset);
            prop_assert_eq!(r.physical_offset, 777);
            prop_assert_eq!(r.born_host, born);
            prop_assert_eq!(r.total_size as usize, out.len());
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes, true);
        }
    }
}
