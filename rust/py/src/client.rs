//! The producer's wire side for Python: RocketMQ's `MQClientAPIImpl` (connections, route
//! lookup, sends) from the core, called with the GIL released. Policy (routes, queues,
//! retries) is `rocketha.client.Producer`'s.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rocketha_core::client::{
    create_uniq_id, MqClientApi, OutgoingMessage, SendError, PROPERTY_UNIQ_KEY,
};
use rocketha_core::remoting::header::SendMessageRequestHeader;
use rocketha_core::store::now_millis;

use crate::errors::{ForkGuard, InvalidMessageError, RemotingConnectError, SendStatusUnknownError};
use crate::message::Message;

/// `(code, remark, offset_msg_id, queue_id, queue_offset, uniq_ids)`.
type SendTuple = (i32, Option<String>, String, i32, i64, Vec<String>);

fn send_error(e: SendError) -> PyErr {
    match e {
        SendError::NotSent(m) => RemotingConnectError::new_err(m),
        SendError::Unknown(m) => SendStatusUnknownError::new_err(m),
    }
}

fn secs(timeout: f64) -> Duration {
    Duration::from_secs_f64(timeout.clamp(0.001, 1e9))
}

/// Connections to name servers and brokers, shared by a producer's threads.
#[pyclass(frozen, module = "rocketha._core")]
pub struct MQClientAPI {
    inner: Arc<MqClientApi>,
    /// The IPv4 address in the message ids (`MessageClientIDSetter`'s prefix).
    client_ip: [u8; 4],
    guard: ForkGuard,
}

#[pymethods]
impl MQClientAPI {
    #[new]
    #[pyo3(signature = (client_ip="127.0.0.1"))]
    fn new(client_ip: &str) -> PyResult<Self> {
        let ip: std::net::Ipv4Addr = client_ip.parse().map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("{client_ip:?} is not an IPv4 address"))
        })?;
        Ok(Self {
            inner: Arc::new(MqClientApi::new()),
            client_ip: ip.octets(),
            guard: ForkGuard::new(),
        })
    }

    /// Closes every connection; later calls connect again.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.inner.close());
    }

    /// GET_ROUTEINFO_BY_TOPIC: the route's standard JSON, or None for an unknown topic.
    fn get_topic_route_info<'py>(
        &self,
        py: Python<'py>,
        namesrv: &str,
        topic: &str,
        timeout: f64,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.guard.check()?;
        let api = &self.inner;
        let route = py
            .detach(|| api.get_topic_route_info(namesrv, topic, secs(timeout)))
            .map_err(send_error)?;
        Ok(route.map(|r| PyBytes::new(py, &r)))
    }

    /// Sends one message (SEND_MESSAGE_V2) or a batch (SEND_BATCH_MESSAGE) of one topic to
    /// `queue_id` of the broker at `addr`. Every message gets a `UNIQ_KEY` unless it has one.
    #[pyo3(signature = (addr, messages, *, producer_group, queue_id, timeout, default_topic="TBW102".to_string(), default_topic_queue_nums=4))]
    #[allow(clippy::too_many_arguments)]
    fn send_message(
        &self,
        py: Python<'_>,
        addr: &str,
        messages: Vec<PyRef<'_, Message>>,
        producer_group: String,
        queue_id: i32,
        timeout: f64,
        default_topic: String,
        default_topic_queue_nums: i32,
    ) -> PyResult<SendTuple> {
        self.guard.check()?;
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
        let now = now_millis();
        let mut uniq_ids = Vec::with_capacity(messages.len());
        let mut owned: Vec<(Vec<u8>, Vec<u8>, i32)> = Vec::with_capacity(messages.len());
        let uniq_marker = format!("{PROPERTY_UNIQ_KEY}\u{1}");
        for m in &messages {
            let mut props = m.properties.clone();
            let text = String::from_utf8_lossy(&props);
            let existing = text
                .split('\u{2}')
                .find_map(|p| p.strip_prefix(uniq_marker.as_str()).map(str::to_owned));
            let id = match existing {
                Some(id) => id,
                None => {
                    let id = create_uniq_id(self.client_ip, now);
                    props.extend_from_slice(format!("{uniq_marker}{id}\u{2}").as_bytes());
                    id
                }
            };
            uniq_ids.push(id);
            owned.push((m.body.as_bytes(py).to_vec(), props, m.flag));
        }
        let batch = owned.len() > 1;
        let header = SendMessageRequestHeader {
            producer_group,
            topic,
            default_topic,
            default_topic_queue_nums,
            queue_id,
            sys_flag: 0,
            born_timestamp: now,
            flag: if batch { 0 } else { owned[0].2 },
            properties: (!batch).then(|| String::from_utf8_lossy(&owned[0].1).into_owned()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            max_reconsume_times: None,
            batch: Some(batch),
            broker_name: None,
        };
        let api = &self.inner;
        let reply = py
            .detach(|| {
                let outgoing: Vec<OutgoingMessage<'_>> = owned
                    .iter()
                    .map(|(body, properties, flag)| OutgoingMessage {
                        body,
                        properties,
                        flag: *flag,
                    })
                    .collect();
                api.send_message(addr, header, &outgoing, secs(timeout))
            })
            .map_err(send_error)?;
        Ok((
            reply.code,
            reply.remark,
            reply.offset_msg_id,
            reply.queue_id,
            reply.queue_offset,
            uniq_ids,
        ))
    }
}
