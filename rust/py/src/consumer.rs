//! The consumer's pieces of the binding: pull answers as Python tuples of `MessageExt`, and
//! subscription expressions checked as the broker will read them.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rocketha_core::client::{decode_pulled, PullReply, SubscriptionData};

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
