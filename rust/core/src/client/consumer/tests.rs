use super::*;
use crate::remoting::codes::SerializeType;

fn pull_header() -> PullMessageRequestHeader {
    PullMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: "T".into(),
        queue_id: 3,
        queue_offset: 42,
        max_msg_nums: 32,
        sys_flag: 0x2 | 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 15_000,
        subscription: Some("a || b".into()),
        sub_version: 1_700_000_000_000,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    }
}

/// The client's PULL_MESSAGE, written out by hand: every field as a string, keys sorted, as
/// the broker (and RocketMQ's) read them.
#[test]
fn golden_pull_request_frame() {
    let cmd = request(request_code::PULL_MESSAGE, &pull_header());
    assert_eq!(
        cmd.encode_json_header(),
        concat!(
            r#"{"code":11,"extFields":{"commitOffset":"0","consumerGroup":"cg","#,
            r#""expressionType":"TAG","maxMsgNums":"32","queueId":"3","queueOffset":"42","#,
            r#""subVersion":"1700000000000","subscription":"a || b","#,
            r#""suspendTimeoutMillis":"15000","sysFlag":"6","topic":"T"},"flag":0,"#,
            r#""language":"RUST","opaque":0,"serializeTypeCurrentRPC":"JSON","version":0}"#
        )
    );
}

/// One commit log record (magic V1, IPv4 hosts), field by field.
fn hand_written_record() -> Vec<u8> {
    let body = b"hello";
    let topic = b"T";
    let props = b"TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ID1\x02";
    let total = 4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + 8
        + 8
        + 8
        + 4
        + 8
        + 4
        + body.len()
        + 1
        + topic.len()
        + 2
        + props.len();
    let mut r = Vec::new();
    r.extend_from_slice(&(total as i32).to_be_bytes());
    r.extend_from_slice(&0xDAA3_20A7u32.to_be_bytes()); // magic V1
    r.extend_from_slice(&crate::protocol::body_crc(body).to_be_bytes());
    r.extend_from_slice(&3i32.to_be_bytes()); // queue id
    r.extend_from_slice(&0i32.to_be_bytes()); // flag
    r.extend_from_slice(&42i64.to_be_bytes()); // queue offset
    r.extend_from_slice(&4096i64.to_be_bytes()); // commit log offset
    r.extend_from_slice(&0i32.to_be_bytes()); // sys flag
    r.extend_from_slice(&1_700_000_000_000i64.to_be_bytes()); // born
    r.extend_from_slice(&[10, 0, 0, 1]);
    r.extend_from_slice(&5555i32.to_be_bytes());
    r.extend_from_slice(&1_700_000_000_001i64.to_be_bytes()); // stored
    r.extend_from_slice(&[127, 0, 0, 1]);
    r.extend_from_slice(&10911i32.to_be_bytes());
    r.extend_from_slice(&0i32.to_be_bytes()); // reconsume times
    r.extend_from_slice(&0i64.to_be_bytes()); // prepared transaction offset
    r.extend_from_slice(&(body.len() as i32).to_be_bytes());
    r.extend_from_slice(body);
    r.push(topic.len() as u8);
    r.extend_from_slice(topic);
    r.extend_from_slice(&(props.len() as i16).to_be_bytes());
    r.extend_from_slice(props);
    assert_eq!(r.len(), total);
    r
}

/// A FOUND answer as the broker sends it: the header fields, the raw records as the body.
#[test]
fn golden_pull_response_decoded() {
    let mut ext = crate::remoting::ExtFields::new();
    for (k, v) in [
        ("suggestWhichBrokerId", "1"),
        ("nextBeginOffset", "44"),
        ("minOffset", "0"),
        ("maxOffset", "100"),
    ] {
        ext.insert(k.into(), v.into());
    }
    let mut response = RemotingCommand::request(0, 0);
    response.mark_response();
    response.serialize_type = SerializeType::Json;
    response.ext_fields = ext;
    let one = hand_written_record();
    response.body = [one.clone(), one].concat();

    let reply = PullReply::from_response("127.0.0.1:10911", response).unwrap();
    assert_eq!(reply.code, response_code::SUCCESS);
    assert_eq!(
        reply.header,
        Some(PullMessageResponseHeader {
            suggest_which_broker_id: 1,
            next_begin_offset: 44,
            min_offset: 0,
            max_offset: 100,
        })
    );
    let records = decode_pulled(&reply.body).unwrap();
    assert_eq!(records.len(), 2);
    let r = &records[0];
    assert_eq!(
        (r.queue_id, r.queue_offset, r.physical_offset),
        (3, 42, 4096)
    );
    assert_eq!((r.topic, r.body), (&b"T"[..], &b"hello"[..]));
    assert_eq!(r.store_timestamp, 1_700_000_000_001);
    assert_eq!(r.store_host.to_string(), "127.0.0.1:10911");
    assert_eq!(r.tags(), Some(&b"a"[..]));
    assert_eq!(
        record::msg_id(&r.store_host, r.physical_offset),
        "7F00000100002A9F0000000000001000"
    );
}

#[test]
fn a_torn_pull_body_is_an_error() {
    let one = hand_written_record();
    assert!(decode_pulled(&one[..one.len() - 1]).is_err());
    let mut bad = one.clone();
    let last = bad.len() - 40;
    bad[last] ^= 0xFF; // inside the body: the CRC no longer matches
    assert!(decode_pulled(&bad).is_err());
}

#[test]
fn a_pull_refused_has_no_header() {
    let mut response = RemotingCommand::request(response_code::SUBSCRIPTION_GROUP_NOT_EXIST, 0);
    response.mark_response();
    response.remark = Some("subscription group [g] does not exist".into());
    let reply = PullReply::from_response("a:1", response).unwrap();
    assert!(reply.header.is_none());
    assert_eq!(reply.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
}

/// `HeartbeatData` of a pull consumer as the Java client's fastjson writes it (keys sorted).
#[test]
fn golden_consumer_heartbeat_body() {
    let consumer = ConsumerData {
        group_name: "cg".into(),
        consume_type: "CONSUME_ACTIVELY".into(),
        message_model: "CLUSTERING".into(),
        consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
        subscriptions: vec![SubscriptionData::build("T", "a || b", "TAG", 7).unwrap()],
    };
    assert_eq!(
        String::from_utf8(consumer_heartbeat_data("c1", &consumer)).unwrap(),
        concat!(
            r#"{"clientID":"c1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","#,
            r#""consumeType":"CONSUME_ACTIVELY","groupName":"cg","messageModel":"CLUSTERING","#,
            r#""subscriptionDataSet":[{"classFilterMode":false,"codeSet":[97,98],"#,
            r#""expressionType":"TAG","subString":"a || b","subVersion":7,"#,
            r#""tagsSet":["a","b"],"topic":"T"}],"unitMode":false}],"producerDataSet":[]}"#
        )
    );
}

#[test]
fn a_subscription_naming_no_tag_is_refused() {
    assert_eq!(
        SubscriptionData::build("T", " * ", "TAG", 0)
            .unwrap()
            .sub_string,
        "*"
    );
    assert!(SubscriptionData::build("T", "", "TAG", 0)
        .unwrap()
        .tags
        .is_empty());
    let err = SubscriptionData::build("T", "|| ||", "TAG", 0).unwrap_err();
    assert!(err.contains("names no tag"), "{err}");
}

#[test]
fn a_sql92_subscription_must_compile_and_has_no_tags() {
    let sub = SubscriptionData::build("T", " a > 5 ", "SQL92", 3).unwrap();
    assert_eq!((sub.sub_string.as_str(), sub.tags.len()), ("a > 5", 0));
    let json = sub.to_json();
    assert_eq!(json["expressionType"], "SQL92");
    assert_eq!(json["subString"], "a > 5");
    let err = SubscriptionData::build("T", "a >", "SQL92", 0).unwrap_err();
    assert!(
        err.starts_with("SQL92 expression \"a >\" of topic T"),
        "{err}"
    );
    let err = SubscriptionData::build("T", "a", "CLASS", 0).unwrap_err();
    assert!(err.contains("unknown"), "{err}");
}

/// The client's CONSUMER_SEND_MSG_BACK as the broker (and RocketMQ's) reads it: every field a
/// string, keys sorted, the consumer's bound and the queue's broker name included, and a
/// version (V3_4_9) from which a broker reads that bound.
#[test]
fn golden_send_back_request_frame() {
    let header = ConsumerSendMsgBackRequestHeader {
        offset: 4096,
        group: "cg".into(),
        delay_level: 0,
        origin_msg_id: Some("ID1".into()),
        origin_topic: Some("T".into()),
        unit_mode: false,
        max_reconsume_times: Some(16),
        broker_name: Some("b".into()),
    };
    let cmd = send_back_request(&header);
    assert_eq!(
        cmd.encode_json_header(),
        concat!(
            r#"{"code":36,"extFields":{"bname":"b","delayLevel":"0","group":"cg","#,
            r#""maxReconsumeTimes":"16","offset":"4096","originMsgId":"ID1","#,
            r#""originTopic":"T","unitMode":"false"},"flag":0,"#,
            r#""language":"RUST","opaque":0,"serializeTypeCurrentRPC":"JSON","version":121}"#
        )
    );
}
