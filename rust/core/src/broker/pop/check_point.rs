//! What pop writes to the revive topic, in RocketMQ's JSON (fastjson's, with its short field
//! names): a `PopCheckPoint` per pop of a queue, an `AckMsg` per ack, a `BatchAckMsg` per
//! batch of acks of one checkpoint. A RocketMQ broker reading our revive topic (a slave that
//! takes over) understands them, and we understand its.

use serde::{Deserialize, Serialize};

/// `PopAckConstants.CK_TAG`, `ACK_TAG`, `BATCH_ACK_TAG`: the revive topic's message tags.
pub(crate) const CK_TAG: &str = "ck";
pub(crate) const ACK_TAG: &str = "ack";
pub(crate) const BATCH_ACK_TAG: &str = "bAck";

/// `PopCheckPoint`: the messages one pop took from one queue, as offsets from `startOffset`,
/// with a bit per message set once it was acked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PopCheckPoint {
    #[serde(rename = "so")]
    pub(crate) start_offset: i64,
    #[serde(rename = "pt")]
    pub(crate) pop_time: i64,
    #[serde(rename = "it")]
    pub(crate) invisible_time: i64,
    #[serde(rename = "bm", default)]
    pub(crate) bit_map: i32,
    #[serde(rename = "n")]
    pub(crate) num: u8,
    #[serde(rename = "q")]
    pub(crate) queue_id: i32,
    #[serde(rename = "t")]
    pub(crate) topic: String,
    #[serde(rename = "c")]
    pub(crate) cid: String,
    /// The checkpoint's own offset in its revive queue, once read from there.
    #[serde(rename = "ro", default)]
    pub(crate) revive_offset: i64,
    /// Each message's queue offset minus `startOffset` (an old checkpoint has none: then
    /// the messages are `num` consecutive offsets).
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub(crate) queue_offset_diff: Option<Vec<i32>>,
    #[serde(rename = "bn", default, skip_serializing_if = "Option::is_none")]
    pub(crate) broker_name: Option<String>,
    /// How often the revive service wrote it again after a failed revive.
    #[serde(rename = "rp", default, skip_serializing_if = "Option::is_none")]
    pub(crate) re_put_times: Option<String>,
    /// fastjson writes the getter `getReviveTime` too; it is read back from `pt` and `it`.
    #[serde(rename = "reviveTime", default)]
    revive_time: i64,
}

impl PopCheckPoint {
    pub(crate) fn new(
        topic: &str,
        cid: &str,
        queue_id: i32,
        start_offset: i64,
        pop_time: i64,
        invisible_time: i64,
        broker_name: &str,
    ) -> Self {
        Self {
            start_offset,
            pop_time,
            invisible_time,
            bit_map: 0,
            num: 0,
            queue_id,
            topic: topic.to_owned(),
            cid: cid.to_owned(),
            revive_offset: 0,
            queue_offset_diff: None,
            broker_name: Some(broker_name.to_owned()),
            re_put_times: None,
            revive_time: pop_time.saturating_add(invisible_time),
        }
    }

    /// When its messages not acked by then are consumed again.
    pub(crate) fn revive_time(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    /// `addDiff`: one more message, at `queue_offset`.
    pub(crate) fn add(&mut self, queue_offset: i64) {
        let diff = i32::try_from(queue_offset - self.start_offset).unwrap_or(i32::MAX);
        self.queue_offset_diff
            .get_or_insert_with(Vec::new)
            .push(diff);
        self.num = self.num.saturating_add(1);
    }

    /// `indexOfAck`: which of its messages `ack_offset` is, if one.
    pub(crate) fn index_of_ack(&self, ack_offset: i64) -> Option<usize> {
        if ack_offset < self.start_offset {
            return None;
        }
        let diff = ack_offset - self.start_offset;
        match self.queue_offset_diff.as_deref() {
            None | Some([]) => (diff < i64::from(self.num)).then_some(diff as usize),
            Some(diffs) => diffs.iter().position(|&d| i64::from(d) == diff),
        }
    }

    /// `ackOffsetByIndex`: the queue offset of its `index`th message.
    pub(crate) fn ack_offset_by_index(&self, index: usize) -> i64 {
        match self.queue_offset_diff.as_deref() {
            None | Some([]) => self.start_offset + index as i64,
            Some(diffs) => self.start_offset + diffs.get(index).map_or(0, |&d| i64::from(d)),
        }
    }

    pub(crate) fn acked(&self, index: usize) -> bool {
        index < 32 && self.bit_map & (1 << index) != 0
    }

    pub(crate) fn set_acked(&mut self, index: usize) {
        if index < 32 {
            self.bit_map |= 1 << index;
        }
    }

    /// The key the revive service matches acks to checkpoints by (`mergeKey`).
    pub(crate) fn merge_key(&self, default_broker: &str) -> String {
        merge_key(
            &self.topic,
            &self.cid,
            self.queue_id,
            self.start_offset,
            self.pop_time,
            self.broker_name.as_deref().unwrap_or(default_broker),
        )
    }

    pub(crate) fn to_json(&self) -> Vec<u8> {
        let mut ck = self.clone();
        ck.revive_time = self.revive_time();
        serde_json::to_vec(&ck).unwrap_or_default()
    }
}

/// `AckMsg`: one message of a checkpoint acked. Also the fields a `BatchAckMsg` shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AckMsg {
    #[serde(rename = "ao", default)]
    pub(crate) ack_offset: i64,
    #[serde(rename = "so")]
    pub(crate) start_offset: i64,
    #[serde(rename = "c")]
    pub(crate) consumer_group: String,
    #[serde(rename = "t")]
    pub(crate) topic: String,
    #[serde(rename = "q")]
    pub(crate) queue_id: i32,
    #[serde(rename = "pt")]
    pub(crate) pop_time: i64,
    #[serde(rename = "bn", default, skip_serializing_if = "Option::is_none")]
    pub(crate) broker_name: Option<String>,
    /// `BatchAckMsg`'s offsets (none in a single ack).
    #[serde(rename = "aol", default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) ack_offset_list: Vec<i64>,
}

impl AckMsg {
    pub(crate) fn merge_key(&self, default_broker: &str) -> String {
        let broker = match self.broker_name.as_deref() {
            Some(b) if !b.trim().is_empty() => b,
            _ => default_broker,
        };
        merge_key(
            &self.topic,
            &self.consumer_group,
            self.queue_id,
            self.start_offset,
            self.pop_time,
            broker,
        )
    }

    /// The queue offsets it acks.
    pub(crate) fn offsets(&self) -> Vec<i64> {
        if self.ack_offset_list.is_empty() {
            vec![self.ack_offset]
        } else {
            self.ack_offset_list.clone()
        }
    }

    pub(crate) fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// `genAckUniqueId`, the unique key of an ack message.
    pub(crate) fn unique_id(&self) -> String {
        if self.ack_offset_list.is_empty() {
            format!(
                "{}@{}@{}@{}@{}@{}@{}",
                self.topic,
                self.queue_id,
                self.ack_offset,
                self.consumer_group,
                self.pop_time,
                self.broker_name.as_deref().unwrap_or(""),
                ACK_TAG
            )
        } else {
            let offsets: Vec<String> = self.ack_offset_list.iter().map(i64::to_string).collect();
            format!(
                "{}@{}@[{}]@{}@{}@{}",
                self.topic,
                self.queue_id,
                offsets.join(", "),
                self.consumer_group,
                self.pop_time,
                BATCH_ACK_TAG
            )
        }
    }
}

/// `genCkUniqueId`.
pub(crate) fn ck_unique_id(ck: &PopCheckPoint) -> String {
    format!(
        "{}@{}@{}@{}@{}@{}@{}",
        ck.topic,
        ck.queue_id,
        ck.start_offset,
        ck.cid,
        ck.pop_time,
        ck.broker_name.as_deref().unwrap_or(""),
        CK_TAG
    )
}

fn merge_key(
    topic: &str,
    group: &str,
    queue_id: i32,
    start_offset: i64,
    pop_time: i64,
    broker: &str,
) -> String {
    format!("{topic}{group}{queue_id}{start_offset}{pop_time}{broker}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_reads_rocketmqs_json_and_finds_its_acks() {
        let raw = r#"{"bm":0,"bn":"broker-a","c":"G","d":[0,2,5],"it":30000,"n":3,"pt":1700000000000,"q":1,"reviveTime":1700000030000,"so":10,"t":"T"}"#;
        let mut ck: PopCheckPoint = serde_json::from_str(raw).unwrap();
        assert_eq!(ck.revive_time(), 1_700_000_030_000);
        assert_eq!(ck.index_of_ack(12), Some(1));
        assert_eq!(ck.index_of_ack(11), None);
        assert_eq!(ck.ack_offset_by_index(2), 15);
        ck.set_acked(1);
        assert!(ck.acked(1) && !ck.acked(0));
        let back: serde_json::Value = serde_json::from_slice(&ck.to_json()).unwrap();
        assert_eq!(back["bm"], 2);
        assert_eq!(back["reviveTime"], 1_700_000_030_000i64);
        assert_eq!(back["d"], serde_json::json!([0, 2, 5]));
    }

    #[test]
    fn an_old_checkpoint_without_diffs_counts_consecutive_offsets() {
        let raw = r#"{"so":4,"pt":1,"it":2,"n":3,"q":0,"t":"T","c":"G"}"#;
        let ck: PopCheckPoint = serde_json::from_str(raw).unwrap();
        assert_eq!(ck.index_of_ack(6), Some(2));
        assert_eq!(ck.index_of_ack(7), None);
        assert_eq!(ck.ack_offset_by_index(1), 5);
    }

    #[test]
    fn acks_and_batch_acks_match_their_checkpoint() {
        let mut ck = PopCheckPoint::new("T", "G", 3, 100, 5, 60_000, "b");
        ck.add(100);
        ck.add(104);
        let ack: AckMsg =
            serde_json::from_str(r#"{"ao":104,"so":100,"c":"G","t":"T","q":3,"pt":5,"bn":"b"}"#)
                .unwrap();
        assert_eq!(ack.merge_key("x"), ck.merge_key("x"));
        assert_eq!(ack.offsets(), vec![104]);
        let batch: AckMsg = serde_json::from_str(
            r#"{"aol":[100,104],"so":100,"c":"G","t":"T","q":3,"pt":5,"bn":""}"#,
        )
        .unwrap();
        assert_eq!(batch.merge_key("b"), ck.merge_key("b"));
        assert_eq!(batch.offsets(), vec![100, 104]);
    }
}
