//! The producer's wire side for Python: RocketMQ's `MQClientAPIImpl` (connections, route
//! lookup, sends) from the core, called with the GIL released. Policy (routes, queues,
//! retries) is `rocketha.client.Producer`'s.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rocketha_core::client::{MqClientApi, OutgoingMessage, SendError, SendTarget};

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
        let owned: Vec<(Vec<u8>, Vec<u8>, i32)> = messages
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
        let (api, ip) = (&self.inner, self.client_ip);
        let (reply, uniq_ids) = py
            .detach(|| {
                let outgoing: Vec<OutgoingMessage<'_>> = owned
                    .iter()
                    .map(|(body, properties, flag)| OutgoingMessage {
                        body,
                        properties,
                        flag: *flag,
                    })
                    .collect();
                api.send(addr, ip, target, &outgoing, secs(timeout))
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
