//! RocketMQ's `TransactionalMessageBridge`: the messages a transaction writes, each built from
//! the one before it. A half message is the producer's message moved to
//! `RMQ_SYS_TRANS_HALF_TOPIC` queue 0 with its topic and queue kept in `REAL_TOPIC` /
//! `REAL_QID`; a check puts a copy of it back with one more `TRANSACTION_CHECK_TIMES`; a commit
//! writes the message to its real topic; every end writes an op message (tag `d`, the ended
//! half queue offsets in its body) to `RMQ_SYS_TRANS_OP_HALF_TOPIC`.

use std::net::SocketAddr;

use crate::commitlog::record::{self, find_property, MessageDraft, RecordView, PROPERTY_TAGS};
use crate::commitlog::transaction::sys_flag;
use crate::store::schedule::{PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC};

pub(crate) const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
pub(crate) const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Where a half message checked `transactionCheckMax` times goes (RocketMQ 5's discard).
pub(crate) const CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// `MessageConst.PROPERTY_PRODUCER_GROUP`: the group the broker checks back.
pub(crate) const PROPERTY_PRODUCER_GROUP: &str = "PGROUP";
const PROPERTY_TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
/// On a copy put back for a check, the queue offset of the original half message: the
/// transaction's identity, whichever copy a producer ends.
const PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// `MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS`: the first check waits this long
/// instead of `transactionTimeOut`.
const PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// `TransactionalMessageUtil.TRANSACTION_ID`.
const PROPERTY_TRANSACTION_ID: &str = "__transactionId__";
const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";
/// `TransactionalMessageUtil.REMOVE_TAG`.
const REMOVE_TAG: &str = "d";

fn text<'a>(properties: &'a [u8], name: &str) -> Option<&'a str> {
    find_property(properties, name).and_then(|v| std::str::from_utf8(v).ok())
}

/// What the broker reads of a half message's properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HalfInfo {
    pub(crate) real_topic: String,
    pub(crate) real_queue_id: i32,
    pub(crate) producer_group: String,
    /// The queue offset of the transaction's first half message.
    pub(crate) identity: i64,
    pub(crate) check_times: i32,
    /// `UNIQ_KEY`: the producer's msgId and the transaction id.
    pub(crate) uniq_key: Option<String>,
    /// How long after its birth it is first checked, when it says so.
    pub(crate) immunity_ms: Option<i64>,
}

impl HalfInfo {
    /// `None` when `r` is no half message rocketha or RocketMQ could have written.
    pub(crate) fn of(r: &RecordView<'_>) -> Option<Self> {
        if r.topic != HALF_TOPIC.as_bytes() {
            return None;
        }
        let p = r.properties;
        let number = |name| text(p, name).and_then(|v| v.trim().parse::<i64>().ok());
        Some(Self {
            real_topic: text(p, PROPERTY_REAL_TOPIC)?.to_owned(),
            real_queue_id: i32::try_from(number(PROPERTY_REAL_QUEUE_ID)?).ok()?,
            producer_group: text(p, PROPERTY_PRODUCER_GROUP).unwrap_or("").to_owned(),
            identity: number(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET).unwrap_or(r.queue_offset),
            check_times: number(PROPERTY_TRANSACTION_CHECK_TIMES)
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0),
            uniq_key: text(p, PROPERTY_UNIQ_KEY).map(str::to_owned),
            immunity_ms: immunity_ms(p),
        })
    }
}

/// `getImmunityTime`: `CHECK_IMMUNITY_TIME_IN_SECONDS` in ms; absent or -1 means
/// `transactionTimeOut`.
pub(crate) fn immunity_ms(properties: &[u8]) -> Option<i64> {
    text(properties, PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|s| *s >= 0)
        .map(|s| s.saturating_mul(1000))
}

/// A message draft with properties of its own.
pub(crate) struct Rewritten<'a> {
    pub(crate) properties: Vec<u8>,
    pub(crate) topic: &'a str,
    pub(crate) queue_id: i32,
    pub(crate) sys_flag: i32,
    pub(crate) prepared_tx_offset: i64,
}

impl<'a> Rewritten<'a> {
    pub(crate) fn draft(&'a self, original: &MessageDraft<'a>) -> MessageDraft<'a> {
        MessageDraft {
            topic: self.topic,
            properties: &self.properties,
            queue_id: self.queue_id,
            sys_flag: self.sys_flag,
            prepared_tx_offset: self.prepared_tx_offset,
            ..*original
        }
    }
}

/// `parseHalfMessageInner`: the producer's message as a half message of `producer_group`.
pub(crate) fn half<'a>(send: &MessageDraft<'a>, producer_group: &str) -> Rewritten<'a> {
    let queue_id = send.queue_id.to_string();
    let mut set = vec![
        (PROPERTY_REAL_TOPIC, send.topic),
        (PROPERTY_REAL_QUEUE_ID, queue_id.as_str()),
    ];
    let uniq = text(send.properties, PROPERTY_UNIQ_KEY);
    if let Some(uniq) = uniq.filter(|u| !u.is_empty()) {
        set.push((PROPERTY_TRANSACTION_ID, uniq));
    }
    if find_property(send.properties, PROPERTY_PRODUCER_GROUP).is_none() {
        set.push((PROPERTY_PRODUCER_GROUP, producer_group));
    }
    Rewritten {
        properties: record::edit_properties(send.properties, &set, &[]),
        topic: HALF_TOPIC,
        queue_id: 0,
        sys_flag: send.sys_flag & !sys_flag::MASK,
        prepared_tx_offset: 0,
    }
}

/// The draft of a stored record, as it was written.
pub(crate) fn as_draft<'a>(r: &RecordView<'a>, topic: &'a str) -> MessageDraft<'a> {
    MessageDraft {
        topic,
        body: r.body,
        properties: r.properties,
        queue_id: r.queue_id,
        flag: r.flag,
        sys_flag: r.sys_flag,
        born_timestamp: r.born_timestamp,
        born_host: r.born_host,
        reconsume_times: r.reconsume_times,
        prepared_tx_offset: r.prepared_tx_offset,
    }
}

/// `renewHalfMessageInner` for a check: the half message again, checked once more, naming the
/// transaction it belongs to.
pub(crate) fn put_back<'a>(r: &RecordView<'a>, info: &HalfInfo) -> Rewritten<'a> {
    let times = (info.check_times + 1).to_string();
    let identity = info.identity.to_string();
    Rewritten {
        properties: record::edit_properties(
            r.properties,
            &[
                (PROPERTY_TRANSACTION_CHECK_TIMES, &times),
                (PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, &identity),
            ],
            &[],
        ),
        topic: HALF_TOPIC,
        queue_id: 0,
        sys_flag: r.sys_flag,
        prepared_tx_offset: 0,
    }
}

/// `endMessageTransaction`: the committed message in its real topic and queue, pointing back
/// at the half message it ends (`preparedTransactionOffset`). Its properties are the half
/// message's less `REAL_TOPIC` and `REAL_QID`: RocketMQ 5.4.0 delivers `TRAN_MSG=true`,
/// `__transactionId__` and, committed at a check, `TRANSACTION_CHECK_TIMES` too.
pub(crate) fn committed<'a>(
    r: &RecordView<'a>,
    info: &'a HalfInfo,
    half_offset: i64,
) -> Rewritten<'a> {
    Rewritten {
        properties: record::edit_properties(
            r.properties,
            &[],
            &[PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID],
        ),
        topic: &info.real_topic,
        queue_id: info.real_queue_id,
        sys_flag: (r.sys_flag & !sys_flag::MASK) | sys_flag::TRANSACTION_COMMIT_TYPE,
        prepared_tx_offset: half_offset,
    }
}

/// `toMessageExtBrokerInner` of `resolveDiscardMsg`: a half message checked too often, kept in
/// `TRANS_CHECK_MAX_TIME_TOPIC` for an operator.
pub(crate) fn discarded<'a>(r: &RecordView<'a>) -> Rewritten<'a> {
    Rewritten {
        properties: r.properties.to_vec(),
        topic: CHECK_MAX_TIME_TOPIC,
        queue_id: 0,
        sys_flag: r.sys_flag,
        prepared_tx_offset: 0,
    }
}

/// An op message's body and properties: the ended copy's queue offset, and the transaction's
/// first when it differs (so RocketMQ, reading this store, removes both), each followed by a
/// comma as RocketMQ 5's batched ops write them.
pub(crate) struct Op {
    body: Vec<u8>,
    properties: Vec<u8>,
}

impl Op {
    pub(crate) fn new(copy_queue_offset: i64, identity: i64) -> Self {
        let body = if copy_queue_offset == identity {
            format!("{copy_queue_offset},")
        } else {
            format!("{copy_queue_offset},{identity},")
        };
        let properties =
            record::encode_properties([(PROPERTY_TAGS, REMOVE_TAG)]).unwrap_or_default();
        Self {
            body: body.into_bytes(),
            properties,
        }
    }

    /// `makeOpMessageInner`, born and stored on the broker.
    pub(crate) fn draft(&self, store_host: SocketAddr, now: i64) -> MessageDraft<'_> {
        MessageDraft {
            topic: OP_TOPIC,
            body: &self.body,
            properties: &self.properties,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now,
            born_host: store_host,
            reconsume_times: 0,
            prepared_tx_offset: 0,
        }
    }
}

/// The half queue offsets an op message ends (`fillOpRemoveMap`): its body's comma-separated
/// numbers, when its tag is `d`.
pub(crate) fn op_offsets(r: &RecordView<'_>) -> Vec<i64> {
    if r.tags() != Some(REMOVE_TAG.as_bytes()) {
        return Vec::new();
    }
    String::from_utf8_lossy(r.body)
        .split(',')
        .filter_map(|o| o.trim().parse().ok())
        .collect()
}

/// `MessageDecoder.encode` of the half message for CHECK_TRANSACTION_STATE's body: the copy
/// as stored, under its real topic and queue.
pub(crate) fn check_body(r: &RecordView<'_>, info: &HalfInfo) -> Vec<u8> {
    let draft = MessageDraft {
        topic: &info.real_topic,
        queue_id: info.real_queue_id,
        ..as_draft(r, HALF_TOPIC)
    };
    let mut out = vec![0; draft.encoded_len(&r.store_host)];
    draft.encode_into(
        &mut out,
        r.queue_offset,
        r.physical_offset,
        r.store_timestamp,
        &r.store_host,
    );
    out
}
