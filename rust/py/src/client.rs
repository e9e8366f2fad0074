//! The client's wire side for Python: RocketMQ's `MQClientAPIImpl` (connections, route
//! lookup, the producer's sends, the consumer's pulls and offsets, operators' queries) from the
//! core, called with the GIL released. Policy (routes, queues, retries) is `rocketha.client`'s
//! and `rocketha.consumer`'s.
//!
//! One class, so one `#[pymethods]` block (pyo3 takes more only with its `multiple-pymethods`
//! feature and the `inventory` crate): its methods stay here, thin, and what they do with
//! their arguments and answers lives by concept beside it: `send` for the producer's, `consumer`
//! for the consumer's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rocketha_core::acl::SessionCredentials;
use rocketha_core::client::{
    decode_pulled, MqClientApi, PullReply, SendError, SendOutcome, SubscriptionData,
    AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS,
};
use rocketha_core::remoting::header::{
    ConsumerSendMsgBackRequestHeader, PullMessageRequestHeader, QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use rocketha_core::store::group_transfer::Verdicts;

use crate::arrow::RecordFilter;
use crate::consumer::{consumer_data, pull_tuple, pulled_tuple, subscription_error, PulledTuple};
use crate::errors::{send_error, CommitLogCorrupted, ForkGuard};
use crate::message::{Message, MessageExt};
use crate::send::{secs, send_tuple, transaction_check, Outgoing, SendTuple, TransactionCheck};
use crate::tls::ClientTls;

/// A fastjson body (bare integer map keys) as standard JSON, which `json.loads` reads.
#[pyfunction]
pub(crate) fn standard_json(body: &[u8]) -> String {
    rocketha_core::client::standard_json(body)
}

/// An operator request's answer: code, remark, header fields, body.
type AdminTuple<'py> = (
    i32,
    Option<String>,
    HashMap<String, String>,
    Bound<'py, PyBytes>,
);

/// Connections to name servers and brokers, shared by a producer's threads.
#[pyclass(frozen, module = "rocketha._core")]
pub struct MQClientAPI {
    inner: Arc<MqClientApi>,
    /// The IPv4 address in the message ids (`MessageClientIDSetter`'s prefix).
    client_ip: [u8; 4],
    /// Outcomes of `send_message_async` tickets, for the Python thread that completes their
    /// futures.
    outcomes: Arc<Verdicts<SendOutcome>>,
    /// Answers of `pull_message_async` tickets, for the consumer's pull thread.
    pulls: Arc<Verdicts<Result<PullReply, SendError>>>,
    guard: ForkGuard,
}

#[pymethods]
impl MQClientAPI {
    #[new]
    #[pyo3(signature = (client_ip="127.0.0.1", *, access_key=None, secret_key=None, security_token=None, tls=None))]
    fn new(
        client_ip: &str,
        access_key: Option<String>,
        secret_key: Option<String>,
        security_token: Option<String>,
        tls: Option<PyRef<'_, ClientTls>>,
    ) -> PyResult<Self> {
        let ip: std::net::Ipv4Addr = client_ip.parse().map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("{client_ip:?} is not an IPv4 address"))
        })?;
        let credentials = match (access_key, secret_key) {
            (Some(access_key), Some(secret_key)) => Some(SessionCredentials {
                access_key,
                secret_key,
                security_token,
            }),
            (None, None) => None,
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "access_key and secret_key go together: set both or neither",
                ))
            }
        };
        Ok(Self {
            inner: Arc::new(MqClientApi::new(credentials, tls.map(|t| t.inner.clone()))?),
            client_ip: ip.octets(),
            outcomes: Arc::default(),
            pulls: Arc::default(),
            guard: ForkGuard::new(),
        })
    }

    /// Closes every connection (what is in flight on them fails); later calls connect again.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.inner.close());
    }

    /// An operator's request to `addr` (a broker or a name server): its code, header fields
    /// and body. The answer's code, remark, header fields and body, whatever the code.
    #[pyo3(signature = (addr, code, *, ext_fields, body, timeout))]
    fn invoke_admin<'py>(
        &self,
        py: Python<'py>,
        addr: &str,
        code: i32,
        ext_fields: HashMap<String, String>,
        body: Vec<u8>,
        timeout: f64,
    ) -> PyResult<AdminTuple<'py>> {
        self.guard.check()?;
        let api = &self.inner;
        let reply = py
            .detach(|| api.invoke_admin(addr, code, ext_fields, body, secs(timeout)))
            .map_err(send_error)?;
        Ok((
            reply.code,
            reply.remark,
            reply.ext_fields,
            PyBytes::new(py, &reply.body),
        ))
    }

    /// GET_ROUTEINFO_BY_TOPIC: the route's standard JSON, or None for an unknown topic, from
    /// the first name server of `namesrv_addr` (`;`-separated) that answers.
    fn get_topic_route_info<'py>(
        &self,
        py: Python<'py>,
        namesrv_addr: &str,
        topic: &str,
        timeout: f64,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.guard.check()?;
        let api = &self.inner;
        let route = py
            .detach(|| api.get_topic_route_info_from_any(namesrv_addr, topic, secs(timeout)))
            .map_err(send_error)?;
        Ok(route.map(|r| PyBytes::new(py, &r)))
    }

    /// Sends one message (SEND_MESSAGE_V2) or a batch (SEND_BATCH_MESSAGE) of one topic to
    /// `queue_id` of the broker at `addr` and waits for the answer. Every message gets a
    /// `UNIQ_KEY` unless it has one.
    #[pyo3(signature = (addr, messages, *, producer_group, queue_id, timeout, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(), default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS))]
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
            &self.inner,
            self.client_ip,
            addr,
            messages,
            producer_group,
            queue_id,
            timeout,
            default_topic,
            default_topic_queue_nums,
        )?;
        py.detach(|| out.send(MqClientApi::send))
            .map(send_tuple)
            .map_err(send_error)
    }

    /// [`Self::send_message`] without waiting: returns a ticket whose outcome
    /// `next_completed` delivers. Raises at once (RemotingConnectError) when nothing could
    /// be sent.
    #[pyo3(signature = (addr, messages, *, producer_group, queue_id, timeout, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(), default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS))]
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
            &self.inner,
            self.client_ip,
            addr,
            messages,
            producer_group,
            queue_id,
            timeout,
            default_topic,
            default_topic_queue_nums,
        )?;
        let (ticket, done) = self.outcomes.ticket();
        // Detached: the first send to an address connects.
        py.detach(|| {
            out.send(|api, addr, ip, target, m, timeout| {
                api.send_async(addr, ip, target, m, timeout, done)
            })
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
    #[pyo3(signature = (addr, messages, *, producer_group, queue_id, timeout, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(), default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS))]
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
            &self.inner,
            self.client_ip,
            addr,
            messages,
            producer_group,
            queue_id,
            timeout,
            default_topic,
            default_topic_queue_nums,
        )?;
        py.detach(|| out.send(MqClientApi::send_oneway))
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

    /// UNREGISTER_CLIENT: the producer or consumer `client_id` leaves its group.
    #[pyo3(signature = (addr, client_id, *, producer_group=None, consumer_group=None, timeout))]
    fn unregister_client(
        &self,
        py: Python<'_>,
        addr: &str,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| {
            api.unregister_client(
                addr,
                client_id,
                producer_group,
                consumer_group,
                secs(timeout),
            )
        })
        .map_err(send_error)
    }

    /// PULL_MESSAGE without waiting: returns a ticket whose answer `next_pulled` delivers.
    /// `timeout` must exceed `suspend_timeout_millis`, which the broker may hold the pull for.
    /// Raises at once (RemotingConnectError) when nothing could be sent.
    #[pyo3(signature = (addr, *, consumer_group, topic, queue_id, queue_offset, max_msg_nums, sys_flag, commit_offset, suspend_timeout_millis, subscription, expression_type, sub_version, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn pull_message_async(
        &self,
        py: Python<'_>,
        addr: &str,
        consumer_group: String,
        topic: String,
        queue_id: i32,
        queue_offset: i64,
        max_msg_nums: i32,
        sys_flag: i32,
        commit_offset: i64,
        suspend_timeout_millis: i64,
        subscription: String,
        expression_type: String,
        sub_version: i64,
        timeout: f64,
    ) -> PyResult<u64> {
        self.guard.check()?;
        let header = PullMessageRequestHeader {
            commit_offset,
            suspend_timeout_millis,
            sub_version,
            expression_type: Some(expression_type),
            ..PullMessageRequestHeader::tag(
                consumer_group,
                topic,
                queue_id,
                queue_offset,
                max_msg_nums,
                sys_flag,
                subscription,
            )
        };
        let api = &self.inner;
        let (ticket, done) = self.pulls.ticket();
        // Detached: the first pull from an address connects.
        py.detach(|| api.pull_message_async(addr, &header, secs(timeout), done))
            .map_err(send_error)?;
        Ok(ticket)
    }

    /// PULL_MESSAGE over queue offsets `[queue_offset, end)`, `window` pulls of
    /// `max_msg_nums` in flight, until about `max_rows` offsets are covered: `(rows,
    /// next_offset, refused)`, the rows the FOUND answers' records that `filter` accepts,
    /// decoded to Arrow (body CRCs checked) with the GIL released and no copy through Python;
    /// `refused` the first other answer as `(code, remark, min_offset, max_offset)` or None.
    /// Without the suspend flag the broker answers at once.
    #[pyo3(signature = (addr, *, consumer_group, topic, queue_id, queue_offset, end, max_msg_nums, window, max_rows, sys_flag, subscription, filter, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn pull_range(
        &self,
        py: Python<'_>,
        addr: &str,
        consumer_group: String,
        topic: String,
        queue_id: i32,
        queue_offset: i64,
        end: i64,
        max_msg_nums: i32,
        window: usize,
        max_rows: i64,
        sys_flag: i32,
        subscription: String,
        filter: PyRef<'_, RecordFilter>,
        timeout: f64,
    ) -> PyResult<PulledTuple> {
        self.guard.check()?;
        let header = PullMessageRequestHeader::tag(
            consumer_group,
            topic,
            queue_id,
            queue_offset,
            max_msg_nums,
            sys_flag,
            subscription,
        );
        let (api, filter) = (&self.inner, &filter.0);
        py.detach(|| {
            api.pull_range(addr, &header, end, window, max_rows, secs(timeout))
                .map_err(send_error)
                .and_then(|range| pulled_tuple(range, filter))
        })
    }

    /// Answers of `pull_message_async` tickets, waiting up to `timeout` seconds (GIL
    /// released) for one: `[(ticket, (code, remark, suggest_which_broker_id,
    /// next_begin_offset, min_offset, max_offset, [MessageExt]) or exception)]`. The records
    /// are decoded (and their body CRCs checked) with the commit log's decoder.
    fn next_pulled<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Vec<(u64, Bound<'py, PyAny>)>> {
        let pulls = self.pulls.clone();
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e6));
        py.detach(move || pulls.wait(timeout))
            .into_iter()
            .map(|(ticket, reply)| {
                let value = match reply.map_err(send_error).and_then(pull_tuple) {
                    Ok(t) => t.into_pyobject(py)?.into_any(),
                    Err(e) => e.into_value(py).into_bound(py).into_any(),
                };
                Ok((ticket, value))
            })
            .collect()
    }

    /// Wakes a `next_pulled` call early (more pulls to send, or shutdown).
    fn wake_pulled(&self) {
        self.pulls.wake();
    }

    /// QUERY_CONSUMER_OFFSET: the group's committed offset of the queue, None when the broker
    /// has none.
    fn query_consumer_offset(
        &self,
        py: Python<'_>,
        addr: &str,
        consumer_group: String,
        topic: String,
        queue_id: i32,
        timeout: f64,
    ) -> PyResult<Option<i64>> {
        self.guard.check()?;
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group,
            topic,
            queue_id,
            set_zero_if_not_found: None,
        };
        let api = &self.inner;
        py.detach(|| api.query_consumer_offset(addr, &header, secs(timeout)))
            .map_err(send_error)
    }

    /// UPDATE_CONSUMER_OFFSET, answered (`oneway=False`) or not.
    #[pyo3(signature = (addr, consumer_group, topic, queue_id, commit_offset, *, oneway, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn update_consumer_offset(
        &self,
        py: Python<'_>,
        addr: &str,
        consumer_group: String,
        topic: String,
        queue_id: i32,
        commit_offset: i64,
        oneway: bool,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group,
            topic,
            queue_id,
            commit_offset,
        };
        let api = &self.inner;
        py.detach(|| api.update_consumer_offset(addr, &header, oneway, secs(timeout)))
            .map_err(send_error)
    }

    /// CONSUMER_SEND_MSG_BACK: hands the message at commit-log `offset` of the broker at
    /// `addr` back for a retry after `delay_level` (0: the broker's `3 + reconsumeTimes`), or
    /// to the dead-letter queue past `max_reconsume_times`. Returns the broker's `(code,
    /// remark)`; 0 is SUCCESS.
    #[pyo3(signature = (addr, *, offset, group, delay_level, origin_msg_id, origin_topic, max_reconsume_times, broker_name=None, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn consumer_send_message_back(
        &self,
        py: Python<'_>,
        addr: &str,
        offset: i64,
        group: String,
        delay_level: i32,
        origin_msg_id: String,
        origin_topic: String,
        max_reconsume_times: i32,
        broker_name: Option<String>,
        timeout: f64,
    ) -> PyResult<(i32, Option<String>)> {
        self.guard.check()?;
        let header = ConsumerSendMsgBackRequestHeader {
            offset,
            group,
            delay_level,
            origin_msg_id: Some(origin_msg_id),
            origin_topic: Some(origin_topic),
            unit_mode: false,
            max_reconsume_times: Some(max_reconsume_times),
            broker_name,
        };
        let api = &self.inner;
        py.detach(|| api.consumer_send_message_back(addr, &header, secs(timeout)))
            .map_err(send_error)
    }

    /// GET_CONSUMER_LIST_BY_GROUP: client ids of the group's live consumers.
    fn get_consumer_id_list_by_group(
        &self,
        py: Python<'_>,
        addr: &str,
        consumer_group: &str,
        timeout: f64,
    ) -> PyResult<Vec<String>> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.get_consumer_id_list_by_group(addr, consumer_group, secs(timeout)))
            .map_err(send_error)
    }

    /// LOCK_BATCH_MQ: the `(topic, broker_name, queue_id)` queues of `queues` that
    /// `client_id` of `group` holds after asking the broker at `addr` to lock them.
    fn lock_batch_mq(
        &self,
        py: Python<'_>,
        addr: &str,
        group: &str,
        client_id: &str,
        queues: Vec<(String, String, i32)>,
        timeout: f64,
    ) -> PyResult<Vec<(String, String, i32)>> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.lock_batch_mq(addr, group, client_id, &queues, secs(timeout)))
            .map_err(send_error)
    }

    /// UNLOCK_BATCH_MQ: gives back the queues `client_id` of `group` holds on `addr`.
    fn unlock_batch_mq(
        &self,
        py: Python<'_>,
        addr: &str,
        group: &str,
        client_id: &str,
        queues: Vec<(String, String, i32)>,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.unlock_batch_mq(addr, group, client_id, &queues, secs(timeout)))
            .map_err(send_error)
    }

    /// GET_MAX_OFFSET: the queue's next offset to be written.
    fn get_max_offset(
        &self,
        py: Python<'_>,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: f64,
    ) -> PyResult<i64> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.get_max_offset(addr, topic, queue_id, secs(timeout)))
            .map_err(send_error)
    }

    /// GET_MIN_OFFSET: the queue's first offset still stored.
    fn get_min_offset(
        &self,
        py: Python<'_>,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: f64,
    ) -> PyResult<i64> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| api.get_min_offset(addr, topic, queue_id, secs(timeout)))
            .map_err(send_error)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after `timestamp` (ms).
    fn search_offset_by_timestamp(
        &self,
        py: Python<'_>,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        timeout: f64,
    ) -> PyResult<i64> {
        self.guard.check()?;
        let api = &self.inner;
        py.detach(|| {
            api.search_offset_by_timestamp(addr, topic, queue_id, timestamp, secs(timeout))
        })
        .map_err(send_error)
    }

    /// QUERY_MESSAGE to one broker: the messages indexed under `key` (a unique key when
    /// `unique`) stored in `[begin, end]`, as the broker returns them (hash neighbours
    /// included; the caller checks the key).
    #[pyo3(signature = (addr, *, topic, key, max_num, begin, end, unique, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn query_message(
        &self,
        py: Python<'_>,
        addr: &str,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
        unique: bool,
        timeout: f64,
    ) -> PyResult<Vec<MessageExt>> {
        self.guard.check()?;
        let api = &self.inner;
        let body = py
            .detach(|| {
                api.query_message(
                    addr,
                    topic,
                    key,
                    max_num,
                    (begin, end),
                    unique,
                    secs(timeout),
                )
            })
            .map_err(send_error)?;
        let records = decode_pulled(&body).map_err(|e| {
            CommitLogCorrupted::new_err(format!("{addr}: a queried record is broken: {e}"))
        })?;
        Ok(records.iter().map(MessageExt::from).collect())
    }

    /// The next CHECK_TRANSACTION_STATE a broker sent this client, waiting up to `timeout`
    /// seconds: the broker's address, the request's header fields and the half message.
    fn next_transaction_check(
        &self,
        py: Python<'_>,
        timeout: f64,
    ) -> PyResult<Option<TransactionCheck>> {
        self.guard.check()?;
        let api = &self.inner;
        let Some(request) = py.detach(|| api.next_server_request(secs(timeout))) else {
            return Ok(None);
        };
        transaction_check(request).map(Some)
    }

    /// HEART_BEAT of a consumer of `group` subscribed to `subscriptions`
    /// (`[(topic, expression, expression_type, sub_version)]`).
    #[pyo3(signature = (addr, client_id, *, group, consume_type, message_model, consume_from_where, subscriptions, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn send_consumer_heartbeat(
        &self,
        py: Python<'_>,
        addr: &str,
        client_id: &str,
        group: String,
        consume_type: String,
        message_model: String,
        consume_from_where: String,
        subscriptions: Vec<(String, String, String, i64)>,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let consumer = consumer_data(
            group,
            consume_type,
            message_model,
            consume_from_where,
            &subscriptions,
        )?;
        let api = &self.inner;
        py.detach(|| api.send_consumer_heartbeat(addr, client_id, &consumer, secs(timeout)))
            .map_err(send_error)
    }

    /// CHECK_CLIENT_CONFIG: raises with the broker's code and reason when it does not take `expression` (of `expression_type`) on `topic` for `group`.
    #[pyo3(signature = (addr, client_id, *, group, topic, expression, expression_type, timeout))]
    #[allow(clippy::too_many_arguments)]
    fn check_client_config(
        &self,
        py: Python<'_>,
        addr: &str,
        client_id: &str,
        group: &str,
        topic: &str,
        expression: &str,
        expression_type: &str,
        timeout: f64,
    ) -> PyResult<()> {
        self.guard.check()?;
        let sub = SubscriptionData::build(topic, expression, expression_type, 0)
            .map_err(subscription_error)?;
        let api = &self.inner;
        py.detach(|| api.check_client_config(addr, client_id, group, &sub, secs(timeout)))
            .map_err(send_error)
    }
}
