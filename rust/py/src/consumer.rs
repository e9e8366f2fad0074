//! The consumer's pieces of the binding: pull answers as Python tuples of `MessageExt` (or, for
//! a range, as Arrow rows), subscription expressions checked as the broker will read them, and
//! a consumer's heartbeat data built from them.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rocketha_core::arrow;
use rocketha_core::client::{
    decode_pulled, ConsumerData, PullReply, PulledRange, SubscriptionData,
};

use crate::arrow::ColumnarBatch;
use crate::errors::CommitLogCorrupted;
use crate::message::MessageExt;

/// `(code, remark, suggest_which_broker_id, next_begin_offset, min_offset, max_offset,
/// messages)`; the offsets are -1 when the answer has no pull header.
pub(crate) type PullTuple = (i32, Option<String>, i64, i64, i64, i64, Vec<MessageExt>);

pub(crate) fn pull_tuple(reply: PullReply) -> PyResult<PullTuple> {
    let messages = decode_pulled(&reply.body)
        .map_err(|e| CommitLogCorrupted::new_err(format!("a pulled record is broken: {e}")))?
        .iter()
        .map(MessageExt::from)
        .collect();
    let (suggest, next, min, max) = reply.header.map_or((-1, -1, -1, -1), |h| {
        (
            h.suggest_which_broker_id,
            h.next_begin_offset,
            h.min_offset,
            h.max_offset,
        )
    });
    Ok((reply.code, reply.remark, suggest, next, min, max, messages))
}

/// `(rows, next_offset, (code, remark, min_offset, max_offset) of a refusal)`.
pub(crate) type PulledTuple = (ColumnarBatch, i64, Option<(i32, Option<String>, i64, i64)>);

/// A pulled range as `MQClientAPI.pull_range` returns it: the records `filter` accepts,
/// decoded to Arrow (body CRCs checked), and the first refusal. Needs no GIL.
pub(crate) fn pulled_tuple(
    range: PulledRange,
    filter: &arrow::RecordFilter,
) -> PyResult<PulledTuple> {
    let rows = arrow::decode_pulled(range.bodies.iter().map(Vec::as_slice), filter)
        .map_err(|e| CommitLogCorrupted::new_err(format!("a pulled record is broken: {e}")))?;
    let refused = range.refused.map(|r| {
        let (min, max) = r.header.map_or((-1, -1), |h| (h.min_offset, h.max_offset));
        (r.code, r.remark, min, max)
    });
    Ok((ColumnarBatch(Arc::new(rows)), range.next_offset, refused))
}

/// A consumer's HEART_BEAT data; `subscriptions` are `[(topic, expression, expression_type,
/// sub_version)]`, each built as the broker will read it (ValueError when it would not).
pub(crate) fn consumer_data(
    group_name: String,
    consume_type: String,
    message_model: String,
    consume_from_where: String,
    subscriptions: &[(String, String, String, i64)],
) -> PyResult<ConsumerData> {
    let subscriptions = subscriptions
        .iter()
        .map(|(topic, expr, kind, version)| SubscriptionData::build(topic, expr, kind, *version))
        .collect::<Result<Vec<_>, _>>()
        .map_err(subscription_error)?;
    Ok(ConsumerData {
        group_name,
        consume_type,
        message_model,
        consume_from_where,
        subscriptions,
    })
}

pub(crate) fn subscription_error(reason: String) -> PyErr {
    PyValueError::new_err(reason)
}

/// `FilterAPI.build`: the expression as sent (`*` for every tag) and the tags a message must
/// carry one of (empty for every message, and for SQL92, which the broker filters by). Raises
/// ValueError for a TAG expression naming no tag, SQL92 that does not compile, or another
/// expression type.
#[pyfunction]
#[pyo3(signature = (topic, expression, expression_type = "TAG"))]
pub(crate) fn parse_subscription(
    topic: &str,
    expression: &str,
    expression_type: &str,
) -> PyResult<(String, Vec<String>)> {
    SubscriptionData::build(topic, expression, expression_type, 0)
        .map(|s| (s.sub_string, s.tags))
        .map_err(subscription_error)
}
