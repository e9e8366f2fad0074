//! Records -> Arrow columnar buffers, for Spark's Python data source.
//!
//! Spark wants `pyarrow.RecordBatch`es; building them row by row in Python costs more than the
//! whole decode. Here a byte range of the commit log is decoded straight into the buffers of
//! Arrow's columnar layout (validity bitmaps, value buffers, offsets + data for variable-length
//! values, a map as offsets over key and value children). The Python side only wraps them with
//! `pyarrow.py_buffer`, without copying. This module knows nothing of pyarrow or Python: the
//! buffer order is documented on [`ColumnBatch::buffers`] and both sides follow it.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;

use crate::commitlog::record::{self, RecordView, PROPERTY_KEYS};
use crate::commitlog::CommitLog;
use crate::error::{CommitLogError, RecordError};

/// One batch's rows stop at this many bytes of variable-length data, far below the 2 GiB that
/// Arrow's 32-bit offsets can address.
pub(crate) const MAX_BATCH_BYTES: usize = 1 << 30;

/// Offsets + data of a `string` or `binary` column, with a validity bitmap once a null appears.
#[derive(Debug, Default)]
pub(crate) struct VarColumn {
    offsets: Vec<i32>,
    data: Vec<u8>,
    validity: Vec<u8>,
    nulls: usize,
    /// Host columns: the address of the last value, which nearly every row repeats.
    last_host: Option<SocketAddr>,
}

impl VarColumn {
    fn new(capacity: usize) -> Self {
        let mut offsets = Vec::with_capacity(capacity + 1);
        offsets.push(0);
        Self {
            offsets,
            ..Self::default()
        }
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn end_value(&mut self) {
        // The batch is cut at MAX_BATCH_BYTES of data, so the data length always fits an i32.
        self.offsets.push(self.data.len() as i32);
        if !self.validity.is_empty() {
            let row = self.len() - 1;
            set_bit(&mut self.validity, row);
        }
    }

    fn push(&mut self, value: &[u8]) {
        self.data.extend_from_slice(value);
        self.end_value();
    }

    /// Arrow strings must be valid UTF-8; Java decodes bad bytes as U+FFFD, and so do we.
    fn push_str(&mut self, value: &[u8]) {
        match std::str::from_utf8(value) {
            Ok(_) => self.push(value),
            Err(_) => self.push(String::from_utf8_lossy(value).as_bytes()),
        }
    }

    fn push_null(&mut self) {
        if self.validity.is_empty() {
            // Every row so far was valid: materialise the bitmap now that it carries information.
            let rows = self.len();
            self.validity = vec![0; rows.div_ceil(8)];
            for i in 0..rows {
                set_bit(&mut self.validity, i);
            }
        }
        self.offsets.push(self.data.len() as i32);
        let row = self.len() - 1;
        if self.validity.len() * 8 <= row {
            self.validity.push(0);
        }
        self.nulls += 1;
    }

    /// `ip:port`, formatted once per run of equal addresses (formatting dominates otherwise).
    fn push_host(&mut self, addr: SocketAddr) {
        let start = self.data.len();
        if self.last_host == Some(addr) {
            let prev = self.offsets[self.len() - 1] as usize;
            self.data.extend_from_within(prev..start);
        } else {
            // Writing into a Vec cannot fail.
            let _ = write!(self.data, "{addr}");
            self.last_host = Some(addr);
        }
        self.end_value();
    }

    fn push_opt_str(&mut self, value: Option<&[u8]>) {
        match value {
            Some(v) => self.push_str(v),
            None => self.push_null(),
        }
    }
}

fn set_bit(bitmap: &mut Vec<u8>, i: usize) {
    if bitmap.len() * 8 <= i {
        bitmap.push(0);
    }
    bitmap[i / 8] |= 1 << (i % 8);
}

/// Value buffers of Arrow's fixed-width types, viewed as bytes.
trait Primitive: Copy {}
impl Primitive for i32 {}
impl Primitive for i64 {}

fn bytes_of<T: Primitive>(values: &[T]) -> &[u8] {
    // SAFETY: i32 and i64 have no padding and every byte pattern is valid as u8; the slice
    // covers exactly the initialised values and borrows from `values`.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// Milliseconds (RocketMQ) to microseconds (Spark's timestamp); a garbage value saturates rather
/// than failing the batch.
fn millis_to_micros(ms: i64) -> i64 {
    ms.saturating_mul(1000)
}

/// The columns of Spark's fixed schema, in its order:
/// `topic string, queueId int, queueOffset long, commitLogOffset long, body binary, tags string,
/// keys string, properties map<string,string>, bornTimestamp timestamp, storeTimestamp timestamp,
/// bornHost string, storeHost string, msgId string, flag int, sysFlag int, reconsumeTimes int`.
#[derive(Debug)]
pub struct ColumnBatch {
    rows: usize,
    bytes: usize,
    topic: VarColumn,
    queue_id: Vec<i32>,
    queue_offset: Vec<i64>,
    commit_log_offset: Vec<i64>,
    body: VarColumn,
    tags: VarColumn,
    keys: VarColumn,
    property_offsets: Vec<i32>,
    property_keys: VarColumn,
    property_values: VarColumn,
    born_timestamp: Vec<i64>,
    store_timestamp: Vec<i64>,
    born_host: VarColumn,
    store_host: VarColumn,
    msg_id: VarColumn,
    flag: Vec<i32>,
    sys_flag: Vec<i32>,
    reconsume_times: Vec<i32>,
}

impl ColumnBatch {
    fn with_capacity(rows: usize) -> Self {
        Self {
            rows: 0,
            bytes: 0,
            topic: VarColumn::new(rows),
            queue_id: Vec::with_capacity(rows),
            queue_offset: Vec::with_capacity(rows),
            commit_log_offset: Vec::with_capacity(rows),
            body: VarColumn::new(rows),
            tags: VarColumn::new(rows),
            keys: VarColumn::new(rows),
            property_offsets: vec![0],
            property_keys: VarColumn::new(rows),
            property_values: VarColumn::new(rows),
            born_timestamp: Vec::with_capacity(rows),
            store_timestamp: Vec::with_capacity(rows),
            born_host: VarColumn::new(rows),
            store_host: VarColumn::new(rows),
            msg_id: VarColumn::new(rows),
            flag: Vec::with_capacity(rows),
            sys_flag: Vec::with_capacity(rows),
            reconsume_times: Vec::with_capacity(rows),
        }
    }

    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// Commit log bytes of the records in this batch.
    pub fn record_bytes(&self) -> usize {
        self.bytes
    }

    fn push(&mut self, r: &RecordView<'_>) {
        self.rows += 1;
        self.bytes += r.total_size as usize;
        self.topic.push_str(r.topic);
        self.queue_id.push(r.queue_id);
        self.queue_offset.push(r.queue_offset);
        self.commit_log_offset.push(r.physical_offset);
        self.body.push(r.body);
        self.tags.push_opt_str(r.tags());
        self.keys
            .push_opt_str(record::find_property(r.properties, PROPERTY_KEYS));
        for (name, value) in record::property_pairs(r.properties) {
            self.property_keys.push_str(name);
            self.property_values.push_str(value);
        }
        self.property_offsets.push(self.property_keys.len() as i32);
        self.born_timestamp.push(millis_to_micros(r.born_timestamp));
        self.store_timestamp
            .push(millis_to_micros(r.store_timestamp));
        self.born_host.push_host(r.born_host);
        self.store_host.push_host(r.store_host);
        record::msg_id_into(&mut self.msg_id.data, &r.store_host, r.physical_offset);
        self.msg_id.end_value();
        self.flag.push(r.flag);
        self.sys_flag.push(r.sys_flag);
        self.reconsume_times.push(r.reconsume_times);
    }

    /// Bytes of variable-length data so far: what bounds a batch.
    fn data_bytes(&self) -> usize {
        self.body.data.len() + self.property_keys.data.len() + self.property_values.data.len()
    }

    /// Null counts of the nullable columns, `(tags, keys)`; every other column has none.
    pub fn null_counts(&self) -> (usize, usize) {
        (self.tags.nulls, self.keys.nulls)
    }

    /// Every buffer in Arrow's order, column by column in schema order. An empty validity
    /// buffer means "no nulls" (pass `None` to pyarrow):
    ///
    /// - `int`, `long`, `timestamp`: validity, values
    /// - `string`, `binary`: validity, offsets, data
    /// - `map<string,string>`: validity, offsets, then the keys (offsets, data) and the values
    ///   (validity, offsets, data) of its entries
    pub fn buffers(&self) -> Vec<&[u8]> {
        fn var(c: &VarColumn) -> [&[u8]; 3] {
            [&c.validity, bytes_of(&c.offsets), &c.data]
        }
        let none: &[u8] = &[];
        let mut out = Vec::with_capacity(40);
        out.extend(var(&self.topic));
        out.extend([none, bytes_of(&self.queue_id)]);
        out.extend([none, bytes_of(&self.queue_offset)]);
        out.extend([none, bytes_of(&self.commit_log_offset)]);
        out.extend(var(&self.body));
        out.extend(var(&self.tags));
        out.extend(var(&self.keys));
        out.extend([none, bytes_of(&self.property_offsets)]);
        out.extend([
            bytes_of(&self.property_keys.offsets),
            &self.property_keys.data,
        ]);
        out.extend(var(&self.property_values));
        out.extend([none, bytes_of(&self.born_timestamp)]);
        out.extend([none, bytes_of(&self.store_timestamp)]);
        out.extend(var(&self.born_host));
        out.extend(var(&self.store_host));
        out.extend(var(&self.msg_id));
        out.extend([none, bytes_of(&self.flag)]);
        out.extend([none, bytes_of(&self.sys_flag)]);
        out.extend([none, bytes_of(&self.reconsume_times)]);
        out
    }

    /// Number of map entries (the length of the properties' key and value children).
    pub fn property_entries(&self) -> usize {
        self.property_keys.len()
    }
}

/// Which records a reader keeps: Kafka's `topics` and per-queue offset bounds.
#[derive(Debug, Default, Clone)]
pub struct RecordFilter {
    /// `None` keeps every topic.
    topics: Option<HashSet<Vec<u8>>>,
    /// topic -> queue id -> queue offsets `[from, to)` to keep; other queues are unbounded.
    queue_bounds: HashMap<Vec<u8>, HashMap<i32, (i64, i64)>>,
}

impl RecordFilter {
    pub fn new(topics: Option<Vec<String>>, queue_bounds: Vec<(String, i32, i64, i64)>) -> Self {
        let mut bounds: HashMap<Vec<u8>, HashMap<i32, (i64, i64)>> = HashMap::new();
        for (topic, queue_id, from, to) in queue_bounds {
            bounds
                .entry(topic.into_bytes())
                .or_default()
                .insert(queue_id, (from, to));
        }
        Self {
            topics: topics.map(|t| t.into_iter().map(String::into_bytes).collect()),
            queue_bounds: bounds,
        }
    }

    pub(crate) fn accepts(&self, r: &RecordView<'_>) -> bool {
        if let Some(topics) = &self.topics {
            if !topics.contains(r.topic) {
                return false;
            }
        }
        match self
            .queue_bounds
            .get(r.topic)
            .and_then(|q| q.get(&r.queue_id))
        {
            Some(&(from, to)) => (from..to).contains(&r.queue_offset),
            None => true,
        }
    }
}

/// Where a decode stopped.
#[derive(Debug)]
pub struct Decoded {
    pub batch: ColumnBatch,
    /// The offset of the first record not yet read: where the next call continues.
    pub next_offset: u64,
    /// Every record before `end` was read.
    pub done: bool,
}

/// How much one call may read: a batch ends at whichever limit comes first (at least one
/// record, so a large record still makes progress).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_rows: usize,
    pub max_bytes: usize,
}

/// Walks the records starting in `[from, end)` and feeds the accepted ones to `take` until it
/// returns false. Returns the offset after the last record walked and whether `end` was reached.
/// A log that ends before `end` (a replica cut back, a partition planned past the data) is an
/// error naming the offset rather than a silently short result.
fn walk(
    log: &CommitLog,
    from: u64,
    end: u64,
    check_crc: bool,
    mut take: impl FnMut(&RecordView<'_>) -> bool,
) -> Result<(u64, bool), CommitLogError> {
    let min_offset = log.min_offset();
    if from < min_offset {
        return Err(CommitLogError::OffsetOutOfRange {
            offset: from,
            min_offset,
            max_offset: log.max_offset(),
        });
    }
    let mut iter = log.iter_from(from, check_crc);
    let mut at = from;
    while at < end {
        let Some(next) = iter.next() else {
            return Err(CommitLogError::OffsetOutOfRange {
                offset: end,
                min_offset,
                max_offset: log.max_offset(),
            });
        };
        let rec = next?;
        if rec.offset() >= end {
            // A blank padded the segment past `end`: the range is complete.
            return Ok((end, true));
        }
        let view = rec.view();
        if !take(&view) {
            return Ok((at, false));
        }
        at = iter.offset();
    }
    Ok((at, true))
}

/// Decodes the accepted records starting in `[from, end)` into one batch, up to `limits`.
pub fn decode_range(
    log: &CommitLog,
    from: u64,
    end: u64,
    filter: &RecordFilter,
    limits: Limits,
    check_crc: bool,
) -> Result<Decoded, CommitLogError> {
    let max_bytes = limits.max_bytes.min(MAX_BATCH_BYTES);
    let mut batch = ColumnBatch::with_capacity(limits.max_rows.min(64 * 1024));
    let (next_offset, done) = walk(log, from, end, check_crc, |r| {
        if batch.rows >= limits.max_rows.max(1)
            || (batch.rows > 0 && batch.data_bytes() >= max_bytes)
        {
            return false;
        }
        if filter.accepts(r) {
            batch.push(r);
        }
        true
    })?;
    Ok(Decoded {
        batch,
        next_offset,
        done,
    })
}

/// Decodes the accepted records of pull answers' bodies (records back to back, as
/// PULL_MESSAGE carries them) into one batch: the network source's twin of [`decode_range`].
/// The body CRCs are checked, as a consumer checks what came over the wire.
pub fn decode_pulled<'a>(
    bodies: impl IntoIterator<Item = &'a [u8]>,
    filter: &RecordFilter,
) -> Result<ColumnBatch, RecordError> {
    let mut records = Vec::new();
    for body in bodies {
        records.extend(crate::client::decode_pulled(body)?);
    }
    records.retain(|r| filter.accepts(r));
    let mut batch = ColumnBatch::with_capacity(records.len());
    for r in &records {
        batch.push(r);
    }
    Ok(batch)
}

/// Streaming admission control: the offset after which `limits` accepted records (or bytes of
/// them) starting at `from` are admitted, at most `end`.
pub fn admit(
    log: &CommitLog,
    from: u64,
    end: u64,
    filter: &RecordFilter,
    limits: Limits,
) -> Result<u64, CommitLogError> {
    let (mut rows, mut bytes) = (0usize, 0usize);
    let (next, _) = walk(log, from, end, false, |r| {
        if !filter.accepts(r) {
            return true;
        }
        let size = r.total_size as usize;
        if rows >= limits.max_rows || (rows > 0 && bytes + size > limits.max_bytes) {
            return false;
        }
        rows += 1;
        bytes += size;
        true
    })?;
    Ok(next)
}

/// Record-aligned offsets that cut `[from, end)` into read partitions: every segment start, and
/// within segments more cuts until there are about `min_parts` pieces. Returns the boundaries
/// including `from` and `end`.
pub fn split_points(
    log: &CommitLog,
    from: u64,
    end: u64,
    min_parts: usize,
) -> Result<Vec<u64>, CommitLogError> {
    let mut cuts = vec![from];
    cuts.extend(
        log.files()
            .files()
            .iter()
            .map(|f| f.start())
            .filter(|&s| s > from && s < end),
    );
    cuts.push(end);
    if from >= end || cuts.len() > min_parts {
        cuts.dedup();
        return Ok(cuts);
    }
    // Records have no index: walk their headers and cut at the first boundary past each target.
    let step = ((end - from) / min_parts as u64).max(1);
    let mut target = from + step;
    let mut extra = Vec::new();
    let mut iter = log.iter_from(from, false);
    loop {
        let at = iter.offset();
        if at >= end || target >= end {
            break;
        }
        if at >= target {
            extra.push(at);
            target = at + step;
        }
        match iter.next() {
            Some(rec) => {
                rec?;
            }
            None => break,
        }
    }
    cuts.extend(extra);
    cuts.sort_unstable();
    cuts.dedup();
    Ok(cuts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commitlog::record::encode_properties;
    use crate::commitlog::record::MessageDraft;
    use crate::store::{MessageStore, StoreConfig};

    fn store_with(n: usize) -> (tempfile::TempDir, MessageStore) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::new(dir.path());
        config.mapped_file_size = 65536;
        let store = MessageStore::open(config).unwrap();
        for i in 0..n {
            let props = if i % 3 == 0 {
                encode_properties([("TAGS", "t"), ("KEYS", "k1 k2"), ("x", "y")]).unwrap()
            } else {
                Vec::new()
            };
            let body = vec![b'a' + (i % 26) as u8; 100 + i % 50];
            let topic = if i % 2 == 0 { "even" } else { "odd" };
            store
                .put(&MessageDraft {
                    topic,
                    body: &body,
                    properties: &props,
                    queue_id: (i % 4) as i32,
                    flag: i as i32,
                    sys_flag: 0,
                    born_timestamp: 1_700_000_000_000 + i as i64,
                    born_host: SocketAddr::from(([10, 0, 0, 1], 1234)),
                    reconsume_times: 0,
                    prepared_tx_offset: 0,
                })
                .unwrap();
        }
        (dir, store)
    }

    fn i32s(b: &[u8]) -> Vec<i32> {
        b.chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn i64s(b: &[u8]) -> Vec<i64> {
        b.chunks(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn all(store: &MessageStore, filter: &RecordFilter, max_rows: usize) -> Vec<ColumnBatch> {
        let log = store.commit_log();
        let (mut at, mut out) = (log.min_offset(), Vec::new());
        loop {
            let limits = Limits {
                max_rows,
                max_bytes: usize::MAX,
            };
            let d = decode_range(log, at, log.max_offset(), filter, limits, true).unwrap();
            out.push(d.batch);
            at = d.next_offset;
            if d.done {
                return out;
            }
        }
    }

    #[test]
    fn decodes_every_field_across_segments() {
        let (_dir, store) = store_with(1000);
        assert!(store.commit_log().files().files().len() >= 3);
        let batches = all(&store, &RecordFilter::default(), 300);
        assert_eq!(
            batches.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            vec![300, 300, 300, 100]
        );
        let expected: Vec<_> = store.iter_from(0, true).map(|r| r.unwrap()).collect();
        let mut row = 0;
        for b in &batches {
            let bufs = b.buffers();
            let topic_offsets = i32s(bufs[1]);
            let queue_ids = i32s(bufs[4]);
            let offsets = i64s(bufs[8]);
            let tags_validity = bufs[12];
            let born = i64s(bufs[26]);
            let (host_offsets, id_offsets) = (i32s(bufs[33]), i32s(bufs[36]));
            for i in 0..b.num_rows() {
                let r = expected[row].view();
                let topic = &bufs[2][topic_offsets[i] as usize..topic_offsets[i + 1] as usize];
                assert_eq!(topic, r.topic);
                assert_eq!(queue_ids[i], r.queue_id);
                assert_eq!(offsets[i], r.physical_offset);
                assert_eq!(born[i], r.born_timestamp * 1000);
                let host = &bufs[34][host_offsets[i] as usize..host_offsets[i + 1] as usize];
                assert_eq!(host, r.store_host.to_string().as_bytes());
                let id = &bufs[37][id_offsets[i] as usize..id_offsets[i + 1] as usize];
                assert_eq!(id, r.msg_id().as_bytes());
                let valid = tags_validity[i / 8] & (1 << (i % 8)) != 0;
                assert_eq!(valid, r.tags().is_some());
                row += 1;
            }
        }
        assert_eq!(row, 1000);
    }

    #[test]
    fn pulled_bodies_decode_like_the_range_they_came_from() {
        let (_dir, store) = store_with(120);
        let records: Vec<_> = store.iter_from(0, true).map(|r| r.unwrap()).collect();
        let raw = |from: usize, to: usize| {
            let (start, end) = (records[from].offset(), records[to].offset());
            let slice = store.read_raw(start, (end - start) as usize).unwrap();
            slice.bytes().to_vec()
        };
        let bodies = [raw(0, 50), raw(50, 100)];
        let filter = RecordFilter::new(None, vec![("even".into(), 0, 0, 10)]);
        let pulled = decode_pulled(bodies.iter().map(|b| &b[..]), &filter).unwrap();
        let limits = Limits {
            max_rows: usize::MAX,
            max_bytes: usize::MAX,
        };
        let end = records[100].offset();
        let local = decode_range(store.commit_log(), 0, end, &filter, limits, true).unwrap();
        assert_eq!(pulled.num_rows(), local.batch.num_rows());
        assert!(pulled.num_rows() > 0);
        assert_eq!(pulled.buffers(), local.batch.buffers());
        // A body cut inside a record is a broken answer, not fewer rows.
        let cut = &bodies[0][..bodies[0].len() - 3];
        assert!(decode_pulled([cut], &filter).is_err());
    }

    #[test]
    fn filter_keeps_topics_and_queue_bounds() {
        let (_dir, store) = store_with(400);
        let filter = RecordFilter::new(
            Some(vec!["even".into()]),
            vec![("even".into(), 0, 10, 20), ("odd".into(), 1, 0, 0)],
        );
        let rows: usize = all(&store, &filter, 1000)
            .iter()
            .map(|b| b.num_rows())
            .sum();
        // The 200 even messages land on queues 0 and 2, 100 each; queue 0 keeps offsets 10..20.
        assert_eq!(rows, 10 + 100);
    }

    #[test]
    fn split_points_are_record_boundaries() {
        let (_dir, store) = store_with(1000);
        let log = store.commit_log();
        let segments = log.files().files().len();
        let cuts = split_points(log, 0, log.max_offset(), segments * 3).unwrap();
        assert!(cuts.len() > segments * 2);
        let boundaries: HashSet<u64> = store
            .iter_from(0, false)
            .map(|r| r.unwrap().offset())
            .chain(log.files().files().iter().map(|f| f.start()))
            .chain([log.max_offset()])
            .collect();
        for c in &cuts {
            assert!(boundaries.contains(c), "{c} is not a record boundary");
        }
        let total: usize = cuts
            .windows(2)
            .map(|w| {
                let limits = Limits {
                    max_rows: usize::MAX,
                    max_bytes: usize::MAX,
                };
                let d =
                    decode_range(log, w[0], w[1], &RecordFilter::default(), limits, false).unwrap();
                assert!(d.done);
                d.batch.num_rows()
            })
            .sum();
        assert_eq!(total, 1000);
    }

    #[test]
    fn admit_counts_accepted_rows_and_bytes() {
        let (_dir, store) = store_with(100);
        let log = store.commit_log();
        let only_odd = RecordFilter::new(Some(vec!["odd".into()]), vec![]);
        let limits = Limits {
            max_rows: 10,
            max_bytes: usize::MAX,
        };
        let next = admit(log, 0, log.max_offset(), &only_odd, limits).unwrap();
        let rows = decode_range(log, 0, next, &only_odd, limits, false).unwrap();
        assert_eq!(rows.batch.num_rows(), 10);
        let one = Limits {
            max_rows: usize::MAX,
            max_bytes: 1,
        };
        let next = admit(log, 0, log.max_offset(), &RecordFilter::default(), one).unwrap();
        let first = store.iter_from(0, false).next().unwrap().unwrap();
        assert_eq!(next, first.view().total_size as u64);
    }

    #[test]
    fn reading_below_min_offset_or_past_the_end_names_the_offset() {
        let (_dir, store) = store_with(10);
        let log = store.commit_log();
        let limits = Limits {
            max_rows: 10,
            max_bytes: usize::MAX,
        };
        let err = decode_range(
            log,
            0,
            log.max_offset() + 100,
            &RecordFilter::default(),
            limits,
            false,
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains(&(log.max_offset() + 100).to_string()));
    }
}
