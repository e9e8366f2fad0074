//! The producer's sends for the binding: a send's arguments copied out of Python once, the same
//! way for the sync, async and oneway sends, and its answer as the tuple `rocketha.client`
//! reads; and a broker's transaction check-back as the half message it names.

use std::collections::HashMap;
use std::time::Duration;

use pyo3::prelude::*;
use rocketha_core::client::{
    decode_pulled, MqClientApi, OutgoingMessage, SendReply, SendTarget, ServerRequest,
};

use crate::errors::{CommitLogCorrupted, InvalidMessageError};
use crate::message::{Message, MessageExt};

/// `(code, remark, offset_msg_id, queue_id, queue_offset, uniq_ids, recall_handle)`.
pub(crate) type SendTuple = (
    i32,
    Option<String>,
    String,
    i32,
    i64,
    Vec<String>,
    Option<String>,
);

pub(crate) fn send_tuple((reply, uniq_ids): (SendReply, Vec<String>)) -> SendTuple {
    (
        reply.code,
        reply.remark,
        reply.offset_msg_id,
        reply.queue_id,
        reply.queue_offset,
        uniq_ids,
        reply.recall_handle,
    )
}

/// Everything a send takes, extracted while the GIL is held so the send itself can run
/// without it: where it goes, what it names besides its messages, and the messages.
pub(crate) struct Outgoing<'a> {
    api: &'a MqClientApi,
    addr: &'a str,
    /// The IPv4 address in the message ids.
    client_ip: [u8; 4],
    target: SendTarget,
    /// `(body, properties, flag)`, copied out of the Python messages.
    messages: Vec<(Vec<u8>, Vec<u8>, i32)>,
    timeout: Duration,
}

impl<'a> Outgoing<'a> {
    /// The arguments every send method takes (`MQClientAPI.send_message`'s), checked: at
    /// least one message, all of one topic (a batch is one SEND_BATCH_MESSAGE to one queue).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn extract(
        py: Python<'_>,
        api: &'a MqClientApi,
        client_ip: [u8; 4],
        addr: &'a str,
        messages: Vec<PyRef<'_, Message>>,
        producer_group: String,
        queue_id: i32,
        timeout: f64,
        default_topic: String,
        default_topic_queue_nums: i32,
    ) -> PyResult<Self> {
        let Some(first) = messages.first() else {
            return Err(InvalidMessageError::new_err("nothing to send: no messages"));
        };
        let topic = first.topic.clone();
        if let Some(other) = messages.iter().find(|m| m.topic != topic) {
            return Err(InvalidMessageError::new_err(format!(
                "a batch holds one topic: {topic:?} and {:?}",
                other.topic
            )));
        }
        let messages = messages
            .iter()
            .map(|m| (m.body.as_bytes(py).to_vec(), m.properties.clone(), m.flag))
            .collect();
        let target = SendTarget {
            producer_group,
            topic,
            queue_id,
            default_topic,
            default_topic_queue_nums,
        };
        Ok(Self {
            api,
            addr,
            client_ip,
            target,
            messages,
            timeout: secs(timeout),
        })
    }

    /// Runs `send`, one of the core's sends (`MqClientApi::send`, `send_oneway`, or
    /// `send_async` with its callback), with the messages borrowed as the core takes them.
    pub(crate) fn send<R>(
        self,
        send: impl FnOnce(
            &MqClientApi,
            &str,
            [u8; 4],
            SendTarget,
            &[OutgoingMessage<'_>],
            Duration,
        ) -> R,
    ) -> R {
        let outgoing: Vec<OutgoingMessage<'_>> = self
            .messages
            .iter()
            .map(|(body, properties, flag)| OutgoingMessage {
                body,
                properties,
                flag: *flag,
            })
            .collect();
        send(
            self.api,
            self.addr,
            self.client_ip,
            self.target,
            &outgoing,
            self.timeout,
        )
    }
}

/// A call's timeout in seconds, as the core takes it: at least a millisecond.
pub(crate) fn secs(timeout: f64) -> Duration {
    Duration::from_secs_f64(timeout.clamp(0.001, 1e9))
}

/// A broker's check-back: its address, the request's header fields, the half message.
pub(crate) type TransactionCheck = (String, HashMap<String, String>, MessageExt);

/// CHECK_TRANSACTION_STATE as the producer's checker reads it: the half message decoded (its
/// body CRC checked) with the commit log's decoder.
pub(crate) fn transaction_check(request: ServerRequest) -> PyResult<TransactionCheck> {
    let records = decode_pulled(&request.body).map_err(|e| {
        CommitLogCorrupted::new_err(format!(
            "{}: the half message of a transaction check is broken: {e}",
            request.addr
        ))
    })?;
    let Some(message) = records.first() else {
        return Err(CommitLogCorrupted::new_err(format!(
            "{}: a transaction check without its half message",
            request.addr
        )));
    };
    Ok((request.addr, request.ext_fields, MessageExt::from(message)))
}
