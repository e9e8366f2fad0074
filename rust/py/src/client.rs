//! The producer's wire side for Python: RocketMQ's `MQClientAPIImpl` (connections, route
//! lookup, sends) from the core, called with the GIL released. Policy (routes, queues,
//! retries) is `rocketha.client.Producer`'s.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rocketha_core::client::{MqClientApi, OutgoingMessage, SendError, SendOutcome, SendTarget};
use rocketha_core::ha::group_transfer::Verdicts;

use crate::errors::{ForkGuard, InvalidMessageError, RemotingConnectError, SendStatusUnknownError};
use crate::message::Message;

/// `(code, remark, offset_msg_id, queue_id, queue_offset, uniq_ids)`.
type SendTuple = (i32, Option<String>, String, i32, i64, Vec<String>);

fn send_tuple((reply, uniq_ids): (rocketha_core::client::SendReply, Vec<String>)) -> SendTuple {
    (
        reply.code,
        reply.remark,
        reply.offset_msg_id,
        reply.queue_id,
        reply.queue_offset,
        uniq_ids,
    )
}

/// What a send names besides its messages.
struct Outgoing {
    target: SendTarget,
    /// `(body, properties, flag)`, copied out of the Python messages.
    messages: Vec<(Vec<u8>, Vec<u8>, i32)>,
}

impl Outgoing {
    fn extract(
        py: Python<'_>,
        messages: Vec<PyRef<'_, Message>>,
        producer_group: String,
        queue_id: i32,
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
        Ok(Self { target, messages })
    }

    /// Runs `f` with the messages borrowed as the core takes them.
    fn with<R>(self, f: impl FnOnce(SendTarget, &[OutgoingMessage<'_>]) -> R) -> R {
        let outgoing: Vec<OutgoingMessage<'_>> = self
            .messages
            .iter()
            .map(|(body, properties, flag)| OutgoingMessage {
                body,
                properties,
                flag: *flag,
            })
            .collect();
        f(self.target, &outgoing)
    }
}

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
    /// Outcomes of `send_message_async` tickets, for the Python thread that completes their
    /// futures.
    outcomes: Arc<Verdicts<SendOutcome>>,
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
            inner: Arc::new(MqClientApi::new()?),
            client_ip: ip.octets(),
            outcomes: Arc::default(),
            guard: ForkGuard::new(),
        })
    }

    /// Closes every connection (what is in flight on them fails); later calls connect again.
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
    /// `queue_id` of the broker at `addr` and waits for the answer. Every message gets a
    /// `UNIQ_KEY` unless it has one.
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
        let out = Outgoing::extract(
            py,
            messages,
            producer_group,
            queue_id,
            default_topic,
            default_topic_queue_nums,
        )?;
        let (api, ip) = (&self.inner, self.client_ip);
        py.detach(|| out.with(|target, m| api.send(addr, ip, target, m, secs(timeout))))
            .map(send_tuple)
            .map_err(send_error)
    }

    /// [`Self::send_message`] without waiting: returns a ticket whose outcome
    /// `next_completed` delivers. Raises at once (RemotingConnectError) when nothing could
    /// be sent.
    #[pyo3(signature = (addr, messages, *, producer_group, queue_id, timeout, default_topic="TBW102".to_string(), default_topic_queue_nums=4))]
    #[allow(clippy::too_many_arguments)]
    fn send_message_async(
        &self,
        py: Python<'_>,
        addr: &str,
        messages: Vec<PyRef<'_, Message>>,
        producer_group: String,
        queue_id: i32,
        timeout: f64,
        default_topic: String,
        default_topic_queue_nums: i32,
    ) -> PyResult<u64> {
        self.guard.check()?;
        let out = Outgoing::extract(
            py,
            messages,
            producer_group,
            queue_id,
            default_topic,
            default_topic_queue_nums,
        )?;
        let (api, ip) = (&self.inner, self.client_ip);
        let (ticket, done) = self.outcomes.ticket();
        // Detached: the first send to an address connects.
        py.detach(|| {
            out.with(|target, m| api.send_async(addr, ip, target, m, secs(timeout), done))
        })
        .map_err(send_error)?;
        Ok(ticket)
    }

    /// Outcomes of `send_message_async` tickets, waiting up to `timeout` seconds (GIL
    /// released) for one: `[(ticket, send tuple or exception)]`.
    fn next_completed<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Vec<(u64, Bound<'py, PyAny>)>> {
        let outcomes = self.outcomes.clone();
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e6));
        py.detach(move || outcomes.wait(timeout))
            .into_iter()
            .map(|(ticket, outcome)| {
                let value = match outcome {
                    Ok(sent) => send_tuple(sent).into_pyobject(py)?.into_any(),
                    Err(e) => send_error(e).into_value(py).into_bound(py).into_any(),
                };
                Ok((ticket, value))
            })
            .collect()
    }

    /// Wakes a `next_completed` call early (shutdown).
    fn wake_completed(&self) {
        self.outcomes.wake();
    }

    /// [`Self::send_message`] as oneway: written, never answered. Returns the messages'
    /// unique ids.
    #[pyo3(signature = (addr, messages, *, producer_group, queue_id, timeout, default_topic="TBW102".to_string(), default_topic_queue_nums=4))]
    #[allow(clippy::too_many_arguments)]
    fn send_message_oneway(
        &self,
        py: Python<'_>,
        addr: &str,
        messages: Vec<PyRef<'_, Message>>,
        producer_group: String,
        queue_id: i32,
        timeout: f64,
        default_topic: String,
        default_topic_queue_nums: i32,
    ) -> PyResult<Vec<String>> {
        self.guard.check()?;
        let out = Outgoing::extract(
            py,
            messages,
            producer_group,
            queue_id,
            default_topic,
            default_topic_queue_nums,
        )?;
        let (api, ip) = (&self.inner, self.client_ip);
        py.detach(|| out.with(|target, m| api.send_oneway(addr, ip, target, m, secs(timeout))))
            .map_err(send_error)
    }

    /// HEART_BEAT: tells the broker at `addr` that `client_id` produces for `producer_group`.
    fn send_heartbeat(
        &self,
        py: Python<'_>,
        addr: &str,
        client_id: &str,
        producer_group: &str,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.send_heartbeat(addr, client_id, producer_group, secs(timeout)))
            .map_err(send_error)
    }

    /// UNREGISTER_CLIENT: the producer `client_id` of `producer_group` leaves the broker.
    fn unregister_client(
        &self,
        py: Python<'_>,
        addr: &str,
        client_id: &str,
        producer_group: &str,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.unregister_client(addr, client_id, producer_group, secs(timeout)))
            .map_err(send_error)
    }
}
