//! Golden frames of the broker's and the name server's answers, over real sockets: each request
//! is written byte by byte as a Java client writes it, and each answer is compared with bytes
//! built field by field from RocketMQ's definitions (`RemotingCommand`'s JSON and ROCKETMQ
//! headers, `SendMessageRequestHeaderV2`'s one-letter fields, `SendMessageResponseHeader`,
//! `HeartbeatData`, `KVTable`, `RegisterBrokerResponseHeader`), never with our encoder. The
//! broker answers in the serialize type of the request, so every exchange runs in both.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rocketha_core::{
    BrokerController, BrokerControllerConfig, MessageStore, NameServer, NamesrvConfig, StoreConfig,
};

const TIMEOUT: Duration = Duration::from_secs(10);
/// `LanguageCode.RUST`, what rocketha answers with.
const RUST: u8 = 12;
/// `LanguageCode.JAVA`.
const JAVA: u8 = 0;

struct Broker {
    _controller: BrokerController,
    _dir: tempfile::TempDir,
    addr: SocketAddr,
}

fn broker() -> Broker {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = StoreConfig::new(dir.path());
    config.mapped_file_size = 64 * 1024;
    config.store_host = addr;
    let store = Arc::new(MessageStore::open(config).unwrap());
    let controller = BrokerController::start(
        listener,
        store,
        None,
        None,
        BrokerControllerConfig::default(),
    )
    .unwrap();
    Broker {
        _controller: controller,
        _dir: dir,
        addr,
    }
}

/// Writes one request frame and reads one whole answer frame.
fn exchange(stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    stream.write_all(request).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut rest = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut rest).unwrap();
    [len.to_vec(), rest].concat()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

/// `totalLength | serializeType << 24 | headerLength | header | body`.
fn frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&(((serialize_type as i32) << 24) | header.len() as i32).to_be_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

fn json_frame(header: &str, body: &[u8]) -> Vec<u8> {
    frame(0, header.as_bytes(), body)
}

/// `RocketMQSerializable.rocketMQProtocolEncode`: code i16, language u8, version i16, opaque
/// i32, flag i32, remark (i32 length + UTF-8), extFields (i32 length, then per entry i16 key
/// length + key, i32 value length + value).
fn rocketmq_header(
    code: i16,
    language: u8,
    version: i16,
    opaque: i32,
    flag: i32,
    fields: &[(&str, &str)],
) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&code.to_be_bytes());
    h.push(language);
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&opaque.to_be_bytes());
    h.extend_from_slice(&flag.to_be_bytes());
    h.extend_from_slice(&0i32.to_be_bytes()); // no remark
    let mut ext = Vec::new();
    for (k, v) in fields {
        ext.extend_from_slice(&(k.len() as i16).to_be_bytes());
        ext.extend_from_slice(k.as_bytes());
        ext.extend_from_slice(&(v.len() as i32).to_be_bytes());
        ext.extend_from_slice(v.as_bytes());
    }
    h.extend_from_slice(&(ext.len() as i32).to_be_bytes());
    h.extend_from_slice(&ext);
    h
}

fn rocketmq_frame(header: Vec<u8>, body: &[u8]) -> Vec<u8> {
    frame(1, &header, body)
}

/// The JSON header of an answer as fastjson writes it: fields in alphabetical order,
/// `extFields` left out when empty, the response bit in `flag`.
fn json_answer(code: i32, opaque: i32, version: i32, fields: &[(&str, &str)]) -> String {
    let ext = if fields.is_empty() {
        String::new()
    } else {
        let pairs: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!(r#""{k}":"{v}""#))
            .collect();
        format!(r#""extFields":{{{}}},"#, pairs.join(","))
    };
    format!(
        r#"{{"code":{code},{ext}"flag":1,"language":"RUST","opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":{version}}}"#
    )
}

/// The JSON header of a Java 5.x client's request (`version` 475).
fn json_request(code: i32, opaque: i32, fields: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!(r#""{k}":"{v}""#))
        .collect();
    format!(
        r#"{{"code":{code},"extFields":{{{}}},"flag":0,"language":"JAVA","opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":475}}"#,
        pairs.join(",")
    )
}

/// `SendMessageRequestHeaderV2`'s one-letter fields (`a` producerGroup ... `m` batch), JSON
/// escaping `\u0001`/`\u0002` in the properties as fastjson does.
const SEND_V2_FIELDS: [(&str, &str); 12] = [
    ("a", "pg"),
    ("b", "TopicTest"),
    ("c", "TBW102"),
    ("d", "4"),
    ("e", "0"),
    ("f", "0"),
    ("g", "1700000000000"),
    ("h", "0"),
    ("i", "UNIQ_KEY\u{1}AABB\u{2}"),
    ("j", "0"),
    ("k", "false"),
    ("m", "false"),
];

fn json_escaped(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(k, v)| {
            let v = v.replace('\u{1}', "\\u0001").replace('\u{2}', "\\u0002");
            (k.to_string(), v)
        })
        .collect()
}

fn as_refs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// `MessageDecoder.createMessageId`: store host IPv4, port, commit log offset, as 32 hex digits.
fn offset_msg_id(host: SocketAddr, offset: u64) -> String {
    let SocketAddr::V4(v4) = host else {
        panic!("IPv4 only")
    };
    let ip: String = v4
        .ip()
        .octets()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    format!("{ip}{:08X}{offset:016X}", v4.port())
}

/// What a stored first message's `SendMessageResponseHeader` carries, with the region and
/// trace switch a Java `SendResult` reads; keys sorted as both encoders write them.
fn send_answer_fields(host: SocketAddr) -> Vec<(String, String)> {
    [
        ("MSG_REGION", "DefaultRegion".to_string()),
        ("TRACE_ON", "true".into()),
        ("msgId", offset_msg_id(host, 0)),
        ("queueId", "0".into()),
        ("queueOffset", "0".into()),
        ("transactionId", "AABB".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn send_message_v2_answer_in_json() {
    let b = broker();
    let mut s = connect(b.addr);
    let fields = json_escaped(&SEND_V2_FIELDS);
    let request = json_frame(&json_request(310, 1, &as_refs(&fields)), b"hello");
    let expected = json_frame(
        &json_answer(0, 1, 475, &as_refs(&send_answer_fields(b.addr))),
        b"",
    );
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut s, &request)),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn send_message_v2_answer_in_rocketmq() {
    let b = broker();
    let mut s = connect(b.addr);
    let request = rocketmq_frame(
        rocketmq_header(310, JAVA, 475, 9, 0, &SEND_V2_FIELDS),
        b"hello",
    );
    let fields = send_answer_fields(b.addr);
    let expected = rocketmq_frame(rocketmq_header(0, RUST, 475, 9, 1, &as_refs(&fields)), b"");
    assert_eq!(exchange(&mut s, &request), expected);
}

/// `CreateTopicRequestHeader`, as `mqadmin updateTopic` sends it.
const CREATE_TOPIC_FIELDS: [(&str, &str); 8] = [
    ("defaultTopic", "TBW102"),
    ("order", "false"),
    ("perm", "6"),
    ("readQueueNums", "2"),
    ("topic", "Created"),
    ("topicFilterType", "SINGLE_TAG"),
    ("topicSysFlag", "0"),
    ("writeQueueNums", "2"),
];

#[test]
fn update_and_create_topic_answer_in_both_types() {
    let b = broker();
    let mut s = connect(b.addr);
    let request = json_frame(&json_request(17, 2, &CREATE_TOPIC_FIELDS), b"");
    let expected = json_frame(&json_answer(0, 2, 475, &[]), b"");
    assert_eq!(exchange(&mut s, &request), expected);
    let request = rocketmq_frame(
        rocketmq_header(17, JAVA, 475, 3, 0, &CREATE_TOPIC_FIELDS),
        b"",
    );
    let expected = rocketmq_frame(rocketmq_header(0, RUST, 475, 3, 1, &[]), b"");
    assert_eq!(exchange(&mut s, &request), expected);
}

/// `HeartbeatData` of a producer, as fastjson writes it (keys sorted).
const HEARTBEAT_BODY: &str = concat!(
    r#"{"clientID":"127.0.0.1@4242#1","consumerDataSet":[],"#,
    r#""producerDataSet":[{"groupName":"pg"}]}"#
);

#[test]
fn heart_beat_request_and_answer_in_both_types() {
    let b = broker();
    let mut s = connect(b.addr);
    let request = json_frame(
        r#"{"code":34,"flag":0,"language":"JAVA","opaque":4,"serializeTypeCurrentRPC":"JSON","version":475}"#,
        HEARTBEAT_BODY.as_bytes(),
    );
    let expected = json_frame(&json_answer(0, 4, 475, &[]), b"");
    assert_eq!(exchange(&mut s, &request), expected);
    let request = rocketmq_frame(
        rocketmq_header(34, JAVA, 475, 5, 0, &[]),
        HEARTBEAT_BODY.as_bytes(),
    );
    let expected = rocketmq_frame(rocketmq_header(0, RUST, 475, 5, 1, &[]), b"");
    assert_eq!(exchange(&mut s, &request), expected);
}

/// `CommitLog.calMsgLength` of the first send: the fixed fields of an IPv4 record (84 bytes),
/// then body, topic and the stored properties (the producer's `UNIQ_KEY`, the broker's
/// `CLUSTER`, each `key\x01value\x02`).
fn first_record_size() -> usize {
    let fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8;
    let properties = "UNIQ_KEY\u{1}AABB\u{2}CLUSTER\u{1}DefaultCluster\u{2}".len();
    fixed + 4 + "hello".len() + 1 + "TopicTest".len() + 2 + properties
}

#[test]
fn get_broker_runtime_info_answers_a_kv_table() {
    let b = broker();
    let mut s = connect(b.addr);
    let fields = json_escaped(&SEND_V2_FIELDS);
    exchange(
        &mut s,
        &json_frame(&json_request(310, 1, &as_refs(&fields)), b"hello"),
    );
    let request = json_frame(
        r#"{"code":28,"flag":0,"language":"JAVA","opaque":6,"serializeTypeCurrentRPC":"JSON","version":475}"#,
        b"",
    );
    let got = exchange(&mut s, &request);
    let header = json_answer(0, 6, 475, &[]);
    // The values that are the clock's: the boot time, and the put rate, which is sampled
    // once a second and so holds the put or not.
    let text = String::from_utf8_lossy(&got);
    let value = |key: &str| {
        let at = text.find(&format!(r#""{key}":""#)).expect(key) + key.len() + 4;
        text[at..].split('"').next().unwrap().to_owned()
    };
    let (boot, put_tps) = (value("bootTimestamp"), value("putTps"));
    let (earliest, disk) = (
        value("earliestMessageTimeStamp"),
        value("commitLogDiskRatio"),
    );
    assert!(
        (0.0..=1.0).contains(&disk.parse::<f64>().unwrap()),
        "{disk}"
    );
    assert_eq!(
        put_tps
            .split(' ')
            .filter_map(|r| r.parse::<f64>().ok())
            .count(),
        3,
        "{put_tps}"
    );
    // `KVTable`: {"table":{key: value}}, every value a string.
    let body = format!(
        concat!(
            r#"{{"table":{{"bootTimestamp":"{}","brokerActive":"true","#,
            r#""brokerId":"0","brokerName":"broker-a","brokerRole":"ASYNC_MASTER","#,
            r#""brokerVersionDesc":"rocketha {}","commitLogDiskRatio":"{}","#,
            r#""commitLogMaxOffset":"{}","#,
            r#""commitLogMinOffset":"0","dispatchBehindBytes":"0","#,
            r#""earliestMessageTimeStamp":"{}","getFoundTps":"0.0 0.0 0.0","#,
            r#""getMissTps":"0.0 0.0 0.0","getTotalTps":"0.0 0.0 0.0","#,
            r#""getTransferedTps":"0.0 0.0 0.0","getTransferredTps":"0.0 0.0 0.0","#,
            r#""groupTransferPending":"0","msgGetTotalTodayNow":"0","#,
            r#""msgPutTotalTodayNow":"1","pageCacheLockTimeMills":"0","#,
            r#""pullRequestsHeld":"0","#,
            r#""pullThreadPoolQueueHeadWaitTimeMills":"0","pullThreadPoolQueueSize":"0","#,
            r#""putTps":"{}","sendThreadPoolQueueHeadWaitTimeMills":"0","#,
            r#""sendThreadPoolQueueSize":"0"}}}}"#
        ),
        boot,
        env!("CARGO_PKG_VERSION"),
        disk,
        first_record_size(),
        earliest,
        put_tps,
    );
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&json_frame(&header, body.as_bytes()))
    );
}

/// `RegisterBrokerBody` with no topics, as a broker's first registration writes it.
const REGISTER_BODY: &str = concat!(
    r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":"#,
    r#"{"counter":1,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{}}}"#
);

/// `RegisterBrokerRequestHeader` (bodyCrc32 0: not checked, as RocketMQ skips it).
fn register_fields<'a>(id: &'a str, addr: &'a str, ha: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("bodyCrc32", "0"),
        ("brokerAddr", addr),
        ("brokerId", id),
        ("brokerName", "broker-a"),
        ("clusterName", "DefaultCluster"),
        ("compressed", "false"),
        ("enableActingMaster", "false"),
        ("haServerAddr", ha),
    ]
}

#[test]
fn register_broker_answers_a_slave_with_its_masters_addresses_in_both_types() {
    let ns = NameServer::start("127.0.0.1:0".parse().unwrap(), NamesrvConfig::default()).unwrap();
    let mut s = connect(ns.local_addr());
    let master = register_fields("0", "127.0.0.1:10911", "127.0.0.1:10912");
    let request = json_frame(&json_request(103, 1, &master), REGISTER_BODY.as_bytes());
    // A master learns no master: both fields are null, left out (`writeIfNotNull`). Java
    // writes the empty map as `"extFields":{}`; rocketha leaves the key out, which every
    // reader takes alike.
    let expected = json_frame(&json_answer(0, 1, 475, &[]), b"");
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut s, &request)),
        String::from_utf8_lossy(&expected)
    );
    let slave = register_fields("1", "127.0.0.1:10921", "");
    let request = rocketmq_frame(
        rocketmq_header(103, JAVA, 475, 2, 0, &slave),
        REGISTER_BODY.as_bytes(),
    );
    let found = [
        ("haServerAddr", "127.0.0.1:10912"),
        ("masterAddr", "127.0.0.1:10911"),
    ];
    let expected = rocketmq_frame(rocketmq_header(0, RUST, 475, 2, 1, &found), b"");
    assert_eq!(exchange(&mut s, &request), expected);
    let request = json_frame(&json_request(103, 3, &slave), REGISTER_BODY.as_bytes());
    let expected = json_frame(&json_answer(0, 3, 475, &found), b"");
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut s, &request)),
        String::from_utf8_lossy(&expected)
    );
}
