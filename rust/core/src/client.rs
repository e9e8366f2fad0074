//! The producer's wire side, RocketMQ's `MQClientAPIImpl`: one kept connection per address
//! (name server or broker), GET_ROUTEINFO_BY_TOPIC, and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
//! with the header and the batch body as the Java client writes them. Route choice, queue
//! selection and retries are the producer's (Python) policy.
//!
//! A failed send says whether the request can have reached the broker: a connect failure
//! ([`SendError::NotSent`]) is safe to retry elsewhere; a failure after the request was written
//! ([`SendError::Unknown`]) may have stored the message, and retrying could store it twice.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::acl::{AclClientRpcHook, SessionCredentials};
use crate::commitlog::record;
use crate::commitlog::transaction::{is_transactional, sys_flag};
use crate::protocol::{body_crc, now_millis};
use crate::remoting::client::RpcHook;
use crate::remoting::client::ServerRequests;
use crate::remoting::header::{
    GetRouteInfoRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, UnregisterClientRequestHeader,
};
use crate::remoting::{
    request_code, response_code, ClientConfig, ClientError, ClientTls, NettyRemotingClient,
    RemotingCommand,
};

mod consumer;
pub use crate::protocol::AUTO_CREATE_TOPIC_KEY_TOPIC;
pub use consumer::{decode_pulled, ConsumerData, PullReply, PulledRange, SubscriptionData};

/// `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`.
pub(crate) const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";
/// `MQVersion.Version.V3_4_9`'s ordinal: a broker takes the `maxReconsumeTimes` of a send-back
/// or of a send to a retry topic only from requests of this version on (else the group's
/// `retryMaxTimes`), so those requests say it; the client's other requests say 0.
const SEND_BACK_VERSION: i32 = 121;

/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// `MessageConst.PROPERTY_RECONSUME_TIME` and `PROPERTY_MAX_RECONSUME_TIMES`: what a send to a
/// retry topic moves into its header.
const PROPERTY_RECONSUME_TIME: &[u8] = b"RECONSUME_TIME";
const PROPERTY_MAX_RECONSUME_TIMES: &[u8] = b"MAX_RECONSUME_TIMES";
/// `MessageDecoder.MESSAGE_MAGIC_CODE` of a batch's inner messages.
const BATCH_MESSAGE_MAGIC: i32 = 0xAABB_CCDDu32 as i32;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Nothing reached the broker: try another.
    #[error("{0}")]
    NotSent(String),
    /// The request may have reached the broker; whether it stored the message is unknown.
    #[error("{0}")]
    Unknown(String),
}

/// A broker's answer to a send: its code and remark, and where the message went when stored.
#[derive(Debug, Clone)]
pub struct SendReply {
    pub code: i32,
    pub remark: Option<String>,
    /// The broker's offset message id(s), comma-separated for a batch.
    pub offset_msg_id: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// A timer message's recall handle (RECALL_MESSAGE cancels it with this).
    pub recall_handle: Option<String>,
}

/// A body as RocketMQ's Java side writes it (fastjson: integer map keys bare, as in
/// `{"offsetTable":{"t@g":{0:5}}}`) in standard JSON, for programs that read admin answers.
pub fn standard_json(body: &[u8]) -> String {
    crate::protocol::json::quote_bare_keys(&String::from_utf8_lossy(body)).into_owned()
}

/// The answer to [`MqClientApi::invoke_admin`].
#[derive(Debug, Clone)]
pub struct AdminReply {
    pub code: i32,
    pub remark: Option<String>,
    pub ext_fields: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// One message of a send: body, `key\x01value\x02` properties, flag.
pub struct OutgoingMessage<'a> {
    pub body: &'a [u8],
    pub properties: &'a [u8],
    pub flag: i32,
}

/// A request a broker sent this client: CHECK_TRANSACTION_STATE.
#[derive(Debug, Clone)]
pub struct ServerRequest {
    /// The broker's address, where the answer goes.
    pub addr: String,
    pub code: i32,
    pub ext_fields: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// Connections by address, shared by every thread of a producer: one event loop, one
/// connection per broker or name server, any number of sends in flight on each.
pub struct MqClientApi {
    remoting: NettyRemotingClient,
    /// The brokers' check-backs of this client's transactions, for its checking thread.
    server_requests: Arc<ServerRequests>,
}

impl MqClientApi {
    /// With `credentials`, every request is signed as `AclClientRPCHook` signs it; with
    /// `tls`, every connection, to name servers and brokers, is TLS (`useTLS`).
    pub fn new(
        credentials: Option<SessionCredentials>,
        tls: Option<ClientTls>,
    ) -> io::Result<Self> {
        let server_requests = Arc::new(ServerRequests::new(vec![
            request_code::CHECK_TRANSACTION_STATE,
        ]));
        Ok(Self {
            remoting: NettyRemotingClient::start(ClientConfig {
                rpc_hook: credentials.map(|credentials| {
                    Arc::new(AclClientRpcHook { credentials }) as Arc<dyn RpcHook>
                }),
                tls,
                server_requests: Some(server_requests.clone()),
                ..ClientConfig::default()
            })?,
            server_requests,
        })
    }

    /// The next request a broker sent this client, waiting up to `timeout` for one.
    pub fn next_server_request(&self, timeout: Duration) -> Option<ServerRequest> {
        let (addr, request) = self.server_requests.take(timeout)?;
        Some(ServerRequest {
            addr: addr.to_string(),
            code: request.code,
            ext_fields: request.ext_fields.into_iter().collect(),
            body: request.body,
        })
    }

    /// Closes every connection (what is in flight on them fails); later calls reconnect.
    pub fn close(&self) {
        self.remoting.close_channels();
    }

    /// Sends `request` to `addr` and waits for its answer.
    pub(crate) fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, SendError> {
        self.remoting
            .invoke_sync(addr, request, timeout)
            .map_err(send_error)
    }

    /// An operator's request (`MQAdminExt`'s calls are each one request and its answer), built
    /// by the caller from its code, header fields and body, and signed as every other is.
    /// The answer's code, remark, header fields and body, whatever the code.
    pub fn invoke_admin(
        &self,
        addr: &str,
        code: i32,
        ext_fields: HashMap<String, String>,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<AdminReply, SendError> {
        let mut request = RemotingCommand::request(code, 0);
        request.ext_fields = ext_fields;
        request.body = body;
        let response = self.invoke(addr, request, timeout)?;
        Ok(AdminReply {
            code: response.code,
            remark: response.remark,
            ext_fields: response.ext_fields,
            body: response.body,
        })
    }

    /// Sends `request` to `addr` and returns; `callback` gets the answer on the client's loop
    /// thread. An `Err` here means nothing was sent and `callback` will not be called.
    pub(crate) fn invoke_async(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
        callback: impl FnOnce(Result<RemotingCommand, SendError>) + Send + 'static,
    ) -> Result<(), SendError> {
        self.remoting
            .invoke_async(addr, request, timeout, move |r| {
                callback(r.map_err(send_error))
            })
            .map_err(send_error)
    }

    /// GET_ROUTEINFO_BY_TOPIC: the route as standard JSON, or `None` when the name server
    /// knows no such topic (`TOPIC_NOT_EXIST`).
    pub(crate) fn get_topic_route_info(
        &self,
        namesrv: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, SendError> {
        let mut request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC, 0);
        request.write_custom_header(&GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            accept_standard_json_only: Some(true),
        });
        let response = self.invoke(namesrv, request, timeout)?;
        match response.code {
            response_code::SUCCESS => Ok(Some(response.body)),
            response_code::TOPIC_NOT_EXIST => Ok(None),
            code => Err(SendError::NotSent(format!(
                "name server {namesrv} answered code {code}: {}",
                response.remark.unwrap_or_default()
            ))),
        }
    }

    /// GET_ROUTEINFO_BY_TOPIC from the name servers of `namesrv_addr` (`;`-separated), each
    /// in turn until one answers, as `MQClientAPIImpl` fails over when one is down; the error
    /// gives every one's reason.
    pub fn get_topic_route_info_from_any(
        &self,
        namesrv_addr: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, SendError> {
        let mut errors = Vec::new();
        for namesrv in namesrv_addrs(namesrv_addr) {
            match self.get_topic_route_info(namesrv, topic, timeout) {
                Ok(route) => return Ok(route),
                Err(e) => errors.push(format!("{namesrv}: {e}")),
            }
        }
        if errors.is_empty() {
            errors.push(format!("{namesrv_addr:?} names no name server"));
        }
        Err(SendError::NotSent(format!(
            "no name server answered for topic {topic}: {}",
            errors.join("; ")
        )))
    }

    /// HEART_BEAT (`MQClientInstance.sendHeartbeatToAllBroker`): tells the broker at `addr`
    /// that client `client_id` produces for `producer_group`.
    pub fn send_heartbeat(
        &self,
        addr: &str,
        client_id: &str,
        producer_group: &str,
        timeout: Duration,
    ) -> Result<(), SendError> {
        let mut request = RemotingCommand::request(request_code::HEART_BEAT, 0);
        request.body = heartbeat_data(client_id, producer_group);
        let response = self.invoke(addr, request, timeout)?;
        expect_success(addr, "HEART_BEAT", response)
    }

    /// UNREGISTER_CLIENT (`MQClientInstance.unregisterClient`): the producer or consumer
    /// leaves its group.
    pub fn unregister_client(
        &self,
        addr: &str,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        timeout: Duration,
    ) -> Result<(), SendError> {
        let mut request = RemotingCommand::request(request_code::UNREGISTER_CLIENT, 0);
        request.write_custom_header(&UnregisterClientRequestHeader {
            client_id: client_id.to_owned(),
            producer_group: producer_group.map(str::to_owned),
            consumer_group: consumer_group.map(str::to_owned),
        });
        let response = self.invoke(addr, request, timeout)?;
        expect_success(addr, "UNREGISTER_CLIENT", response)
    }
}

/// `HeartbeatData` as fastjson writes it (keys sorted), for a producer only.
pub(crate) fn heartbeat_data(client_id: &str, producer_group: &str) -> Vec<u8> {
    serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [],
        "producerDataSet": [{ "groupName": producer_group }],
    })
    .to_string()
    .into_bytes()
}

fn expect_success(addr: &str, what: &str, response: RemotingCommand) -> Result<(), SendError> {
    if response.code == response_code::SUCCESS {
        return Ok(());
    }
    Err(SendError::Unknown(format!(
        "{addr} answered {what} with code {}: {}",
        response.code,
        response.remark.unwrap_or_default()
    )))
}

/// A client error as a send failure: [`SendError::NotSent`] only when nothing of the request
/// left the process.
fn send_error(e: ClientError) -> SendError {
    if e.may_have_arrived() {
        SendError::Unknown(e.to_string())
    } else {
        SendError::NotSent(e.to_string())
    }
}

/// SEND_MESSAGE_V2 for one message, SEND_BATCH_MESSAGE for several (the header's properties
/// then apply to all; each message keeps its own).
fn send_request(
    header: SendMessageRequestHeader,
    messages: &[OutgoingMessage<'_>],
) -> RemotingCommand {
    let (code, body) = match messages {
        [one] => (request_code::SEND_MESSAGE_V2, one.body.to_vec()),
        _ => (request_code::SEND_BATCH_MESSAGE, encode_batch(messages)),
    };
    let mut request = RemotingCommand::request(code, 0);
    request.write_custom_header(&SendMessageRequestHeaderV2(header));
    request.body = body;
    request
}

/// `MQClientAPIImpl.processSendResponse`: the broker's code and, when it stored the message,
/// where.
fn send_reply(addr: &str, response: RemotingCommand) -> Result<SendReply, SendError> {
    let mut reply = SendReply {
        code: response.code,
        remark: response.remark.clone(),
        offset_msg_id: String::new(),
        queue_id: -1,
        queue_offset: -1,
        recall_handle: None,
    };
    if response_code::send_stored(response.code) {
        let header: SendMessageResponseHeader = response.decode_custom_header().map_err(|e| {
            SendError::Unknown(format!("{addr} answered a send with a bad header: {e}"))
        })?;
        reply.offset_msg_id = header.msg_id;
        reply.queue_id = header.queue_id;
        reply.queue_offset = header.queue_offset;
        reply.recall_handle = header.recall_handle;
    }
    Ok(reply)
}

/// `DefaultMQProducer.defaultTopicQueueNums`: the queues a topic created by a send gets (at
/// most the broker's `defaultTopicQueueNums`).
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;

/// The name servers of a `namesrvAddr` (`host:port` separated by `;`), in order.
pub(crate) fn namesrv_addrs(namesrv_addr: &str) -> impl Iterator<Item = &str> {
    namesrv_addr
        .split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
}

/// Where a producer's send goes and how the broker may create its topic.
pub struct SendTarget {
    pub producer_group: String,
    pub topic: String,
    pub queue_id: i32,
    /// The template a broker creates an unknown topic from (`TBW102`).
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
}

/// What a send's answer resolves to: the broker's reply and the messages' unique ids.
pub type SendOutcome = Result<(SendReply, Vec<String>), SendError>;

impl MqClientApi {
    /// `DefaultMQProducerImpl.sendKernelImpl`, synchronous: returns the broker's reply and the
    /// messages' unique ids, the msgIds a Java producer reports.
    pub fn send(
        &self,
        addr: &str,
        client_ip: [u8; 4],
        target: SendTarget,
        messages: &[OutgoingMessage<'_>],
        timeout: Duration,
    ) -> SendOutcome {
        let (request, ids) = stamp(client_ip, target, messages);
        let response = self.invoke(addr, request, timeout)?;
        Ok((send_reply(addr, response)?, ids))
    }

    /// [`Self::send`] (`CommunicationMode.ASYNC`): returns once the request is queued;
    /// `callback` gets the outcome on the client's loop thread. An `Err` here means nothing
    /// was sent and `callback` will not be called.
    pub fn send_async(
        &self,
        addr: &str,
        client_ip: [u8; 4],
        target: SendTarget,
        messages: &[OutgoingMessage<'_>],
        timeout: Duration,
        callback: impl FnOnce(SendOutcome) + Send + 'static,
    ) -> Result<(), SendError> {
        let (request, ids) = stamp(client_ip, target, messages);
        let owned_addr = addr.to_owned();
        self.invoke_async(addr, request, timeout, move |r| {
            callback(r.and_then(|response| Ok((send_reply(&owned_addr, response)?, ids))));
        })
    }

    /// [`Self::send`] (`CommunicationMode.ONEWAY`): queued, never answered; returns the
    /// messages' unique ids.
    pub fn send_oneway(
        &self,
        addr: &str,
        client_ip: [u8; 4],
        target: SendTarget,
        messages: &[OutgoingMessage<'_>],
        timeout: Duration,
    ) -> Result<Vec<String>, SendError> {
        let (request, ids) = stamp(client_ip, target, messages);
        self.remoting
            .invoke_oneway(addr, request, timeout)
            .map_err(send_error)?;
        Ok(ids)
    }
}

/// Gives each message its `UNIQ_KEY` (keeping one it has) and builds the send request.
fn stamp(
    client_ip: [u8; 4],
    target: SendTarget,
    messages: &[OutgoingMessage<'_>],
) -> (RemotingCommand, Vec<String>) {
    let now = now_millis();
    let batch = messages.len() > 1;
    let mut ids = Vec::with_capacity(messages.len());
    let mut properties: Vec<Vec<u8>> = Vec::with_capacity(messages.len());
    let mut counts = (None, None);
    for m in messages {
        let mut props = m.properties.to_vec();
        if !batch && target.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            counts = take_retry_counts(&mut props);
        }
        let existing = uniq_key(&String::from_utf8_lossy(m.properties)).map(str::to_owned);
        ids.push(existing.unwrap_or_else(|| {
            let id = create_uniq_id(client_ip, now);
            props.extend_from_slice(format!("{PROPERTY_UNIQ_KEY}\u{1}{id}\u{2}").as_bytes());
            id
        }));
        properties.push(props);
    }
    let stamped: Vec<OutgoingMessage<'_>> = messages
        .iter()
        .zip(&properties)
        .map(|(m, properties)| OutgoingMessage {
            body: m.body,
            properties,
            flag: m.flag,
        })
        .collect();
    let header = SendMessageRequestHeader {
        producer_group: target.producer_group,
        topic: target.topic,
        default_topic: target.default_topic,
        default_topic_queue_nums: target.default_topic_queue_nums,
        queue_id: target.queue_id,
        // `sendKernelImpl`: a half message says so in its flag as well as in `TRAN_MSG`.
        sys_flag: if !batch && is_transactional(stamped[0].properties) {
            sys_flag::TRANSACTION_PREPARED_TYPE
        } else {
            0
        },
        born_timestamp: now,
        flag: if batch { 0 } else { stamped[0].flag },
        properties: (!batch).then(|| String::from_utf8_lossy(stamped[0].properties).into_owned()),
        reconsume_times: Some(counts.0.unwrap_or(0)),
        unit_mode: Some(false),
        max_reconsume_times: counts.1,
        batch: Some(batch),
        broker_name: None,
    };
    let mut request = send_request(header, &stamped);
    if counts.1.is_some() {
        request.version = SEND_BACK_VERSION;
    }
    (request, ids)
}

/// `sendKernelImpl`: a message sent to a retry topic (a consumer's fallback when its send-back
/// failed) carries its reconsume count and bound in the header, taken out of its properties;
/// the broker puts it in the dead-letter queue once the count reaches the bound. A value that
/// is not a number stays a property.
fn take_retry_counts(properties: &mut Vec<u8>) -> (Option<i32>, Option<i32>) {
    let (mut reconsume, mut max) = (None, None);
    let mut kept = Vec::with_capacity(properties.len());
    for (name, value) in record::property_pairs(properties) {
        let number = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        match (name, number) {
            (PROPERTY_RECONSUME_TIME, Some(n)) => reconsume = Some(n),
            (PROPERTY_MAX_RECONSUME_TIMES, Some(n)) => max = Some(n),
            _ => {
                kept.extend_from_slice(name);
                kept.push(1);
                kept.extend_from_slice(value);
                kept.push(2);
            }
        }
    }
    *properties = kept;
    (reconsume, max)
}

/// `MessageClientIDSetter.getUniqID`: the `UNIQ_KEY` of `key\x01value\x02` properties.
pub(crate) fn uniq_key(properties: &str) -> Option<&str> {
    properties.split('\u{2}').find_map(|p| {
        p.split_once('\u{1}')
            .filter(|(k, _)| *k == PROPERTY_UNIQ_KEY)
            .map(|(_, v)| v)
    })
}

/// `MessageDecoder.encodeMessages`: per message `totalSize | magic | bodyCRC | flag | bodyLen |
/// body | propLen i16 | properties`.
pub(crate) fn encode_batch(messages: &[OutgoingMessage<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        let props_len = m.properties.len().min(i16::MAX as usize);
        let total = 4 + 4 + 4 + 4 + 4 + m.body.len() + 2 + props_len;
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&BATCH_MESSAGE_MAGIC.to_be_bytes());
        out.extend_from_slice(&body_crc(m.body).to_be_bytes());
        out.extend_from_slice(&m.flag.to_be_bytes());
        out.extend_from_slice(&(m.body.len() as i32).to_be_bytes());
        out.extend_from_slice(m.body);
        out.extend_from_slice(&(props_len as i16).to_be_bytes());
        out.extend_from_slice(&m.properties[..props_len]);
    }
    out
}

/// `MessageClientIDSetter.createUniqID`: 32 upper-case hex digits, a fixed prefix (IPv4
/// address 4, process id 2, a per-process number 4 where Java has the class loader's hash)
/// then the milliseconds since the start of the month (4) and a counter (2).
pub(crate) fn create_uniq_id(ip: [u8; 4], now_millis: i64) -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let pid = (std::process::id() & 0xFFFF) as u16;
        // Distinguishes producers started in the same process, as the loader hash does.
        let salt = (now_millis as u32) ^ 0x5bd1_e995;
        let mut p = String::with_capacity(20);
        for b in ip
            .iter()
            .chain(&pid.to_be_bytes())
            .chain(&salt.to_be_bytes())
        {
            p.push_str(&format!("{b:02X}"));
        }
        p
    });
    let month_start = month_start_millis(now_millis);
    let since = (now_millis - month_start).max(0) as u32;
    let count = (COUNTER.fetch_add(1, Ordering::Relaxed) & 0xFFFF) as u16;
    format!("{prefix}{since:08X}{count:04X}")
}

/// Midnight UTC of the first day of `millis`'s month (Java uses the local zone; any fixed
/// origin keeps ids unique within the month).
fn month_start_millis(millis: i64) -> i64 {
    let days = millis.div_euclid(86_400_000);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    (days - (day - 1)) * 86_400_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_come_from_the_first_name_server_that_answers() {
        use crate::namesrv::{NameServer, NamesrvConfig};
        let ns =
            NameServer::start("127.0.0.1:0".parse().unwrap(), NamesrvConfig::default()).unwrap();
        let api = MqClientApi::new(None, None).unwrap();
        let timeout = Duration::from_secs(5);
        // A dead name server first, blanks around the separators: the live one answers.
        let both = format!(" 127.0.0.1:1 ; {};", ns.local_addr());
        assert_eq!(
            api.get_topic_route_info_from_any(&both, "T", timeout)
                .unwrap(),
            None
        );
        let err = api
            .get_topic_route_info_from_any("127.0.0.1:1;127.0.0.1:2", "T", timeout)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("no name server answered for topic T: 127.0.0.1:1: ")
                && err.contains("; 127.0.0.1:2: "),
            "{err}"
        );
        assert!(api
            .get_topic_route_info_from_any(" ; ", "T", timeout)
            .unwrap_err()
            .to_string()
            .contains("names no name server"));
    }

    #[test]
    fn uniq_ids_are_32_hex_digits_and_differ() {
        let a = create_uniq_id([10, 0, 0, 1], 1_700_000_000_000);
        let b = create_uniq_id([10, 0, 0, 1], 1_700_000_000_000);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with("0A000001"));
        assert_ne!(a, b);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
    }

    /// `HeartbeatData` of a producer as the Java client's fastjson writes it (keys sorted).
    #[test]
    fn golden_heartbeat_body() {
        assert_eq!(
            String::from_utf8(heartbeat_data("127.0.0.1@4242#1", "pg")).unwrap(),
            concat!(
                r#"{"clientID":"127.0.0.1@4242#1","consumerDataSet":[],"#,
                r#""producerDataSet":[{"groupName":"pg"}]}"#
            )
        );
    }

    #[test]
    fn uniq_key_is_read_from_properties() {
        assert_eq!(uniq_key("A\u{1}b\u{2}UNIQ_KEY\u{1}ID1\u{2}"), Some("ID1"));
        assert_eq!(uniq_key("UNIQ_KEYX\u{1}no\u{2}"), None);
        assert_eq!(uniq_key(""), None);
    }

    /// A send to a retry topic carries the reconsume count and bound in its header, as the
    /// Java producer's `sendKernelImpl`; other topics keep such properties as they are. (The
    /// id prefix is the process's first caller's address: the same as the test above.)
    #[test]
    fn a_retry_send_moves_its_counts_into_the_header() {
        let target = |topic: &str| SendTarget {
            producer_group: "pg".into(),
            topic: topic.into(),
            queue_id: 0,
            default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.into(),
            default_topic_queue_nums: 4,
        };
        let props = b"RETRY_TOPIC\x01T\x02RECONSUME_TIME\x013\x02MAX_RECONSUME_TIMES\x0116\x02";
        let one = [OutgoingMessage {
            body: b"x",
            properties: props,
            flag: 0,
        }];
        let (request, _) = stamp([10, 0, 0, 1], target("%RETRY%cg"), &one);
        let header = SendMessageRequestHeader::parse(&request).unwrap();
        assert_eq!(
            (header.reconsume_times, header.max_reconsume_times),
            (Some(3), Some(16))
        );
        assert_eq!(request.version, SEND_BACK_VERSION);
        let kept = header.properties.unwrap();
        assert!(
            kept.starts_with("RETRY_TOPIC\u{1}T\u{2}UNIQ_KEY\u{1}"),
            "{kept}"
        );
        let (request, _) = stamp([10, 0, 0, 1], target("T"), &one);
        let header = SendMessageRequestHeader::parse(&request).unwrap();
        assert_eq!(
            (header.reconsume_times, header.max_reconsume_times),
            (Some(0), None)
        );
        assert!(header.properties.unwrap().contains("RECONSUME_TIME\u{1}3"));
    }

    #[test]
    fn month_start() {
        // 2023-11-14T22:13:20Z -> 2023-11-01T00:00:00Z.
        assert_eq!(month_start_millis(1_700_000_000_000), 1_698_796_800_000);
        assert_eq!(month_start_millis(1_698_796_800_000), 1_698_796_800_000);
    }

    #[test]
    fn a_batch_decodes_as_the_broker_reads_it() {
        let body = encode_batch(&[
            OutgoingMessage {
                body: b"one",
                properties: b"A\x01b\x02",
                flag: 3,
            },
            OutgoingMessage {
                body: b"two!",
                properties: b"",
                flag: 0,
            },
        ]);
        // totalSize of the first: 20 + 3 + 2 + 4.
        assert_eq!(i32::from_be_bytes(body[0..4].try_into().unwrap()), 29);
        assert_eq!(&body[20..23], b"one");
        assert_eq!(body.len(), 29 + 26);
    }
}
