//! Pops, acks and invisible-time changes over real sockets, each request written under the
//! field names RocketMQ 5's remoting client (and the proxy) sends; what comes back is checked
//! as the client reads it (the response header's offsets, the records' bytes).

use std::time::{Duration, Instant};

use super::*;
use crate::broker::controller::tests::{client, create_topic, send_v2, start, Broker, TIMEOUT};
use crate::broker::pop::extra_info::ExtraInfo;
use crate::broker::BrokerControllerConfig;
use crate::commitlog::record::find_property;
use crate::remoting::header::{ChangeInvisibleTimeResponseHeader, PopMessageResponseHeader};
use crate::remoting::RemotingClient;

const GROUP: &str = "pop-group";

fn broker() -> (Broker, RemotingClient) {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let r = c.invoke(create_topic("T", 1), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    (b, c)
}

fn send(c: &mut RemotingClient, body: &[u8]) {
    let r = c.invoke(send_v2("T", 0, body), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

fn order_pop(max: i32, invisible_ms: i64, attempt: &str) -> RemotingCommand {
    let mut r = pop_request(max, invisible_ms, 0);
    r.ext_fields.insert("order".into(), "true".into());
    r.ext_fields.insert("attemptId".into(), attempt.into());
    r
}

fn pop_request(max: i32, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::POP_MESSAGE, 0);
    for (k, v) in [
        ("consumerGroup", GROUP.to_owned()),
        ("topic", "T".to_owned()),
        ("queueId", "-1".to_owned()),
        ("maxMsgNums", max.to_string()),
        ("invisibleTime", invisible_ms.to_string()),
        ("pollTime", poll_ms.to_string()),
        ("bornTime", now_millis().to_string()),
        ("initMode", "1".to_owned()),
        ("expType", "TAG".to_owned()),
        ("exp", "*".to_owned()),
        ("order", "false".to_owned()),
    ] {
        r.ext_fields.insert(k.into(), v);
    }
    r
}

/// A popped message as the client sees it: topic, queue offset, body, reconsume count, and
/// the extra info it acks with (its `POP_CK`, or built from the header as the client does).
struct Popped {
    topic: String,
    queue_id: i32,
    offset: i64,
    body: Vec<u8>,
    reconsume_times: i32,
    extra_info: String,
}

fn pop(c: &mut RemotingClient, max: i32, invisible_ms: i64, poll_ms: i64) -> (i32, Vec<Popped>) {
    pop_with(c, pop_request(max, invisible_ms, poll_ms), poll_ms)
}

fn pop_with(c: &mut RemotingClient, request: RemotingCommand, poll_ms: i64) -> (i32, Vec<Popped>) {
    let (code, got, _) = pop_full(c, request, poll_ms);
    (code, got)
}

/// A pop's code, messages and `orderCountInfo`.
fn pop_full(
    c: &mut RemotingClient,
    request: RemotingCommand,
    poll_ms: i64,
) -> (i32, Vec<Popped>, Option<String>) {
    let r = c
        .invoke(request, TIMEOUT + Duration::from_millis(poll_ms as u64))
        .unwrap();
    if r.code != response_code::SUCCESS {
        return (r.code, Vec::new(), None);
    }
    let h: PopMessageResponseHeader = r.decode_custom_header().unwrap();
    let start: i64 = h
        .start_offset_info
        .as_deref()
        .and_then(|s| s.split(';').next()?.split(' ').nth(2)?.parse().ok())
        .unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < r.body.len() {
        let Ok(Peeked::Record(m)) = record::decode(&r.body[at..], false) else {
            panic!("an undecodable record at {at}");
        };
        at += m.total_size as usize;
        let extra_info = find_property(m.properties, PROPERTY_POP_CK).map_or_else(
            || {
                format!(
                    "{start} {} {} {} 0 broker-a {} {}",
                    h.pop_time, h.invisible_time, h.revive_qid, m.queue_id, m.queue_offset
                )
            },
            |ck| String::from_utf8(ck.to_vec()).unwrap(),
        );
        out.push(Popped {
            topic: String::from_utf8(m.topic.to_vec()).unwrap(),
            queue_id: m.queue_id,
            offset: m.queue_offset,
            body: m.body.to_vec(),
            reconsume_times: m.reconsume_times,
            extra_info,
        });
    }
    (r.code, out, h.order_count_info)
}

fn ack_request(p: &Popped) -> RemotingCommand {
    let info = ExtraInfo::parse(&p.extra_info).unwrap();
    let mut r = RemotingCommand::request(request_code::ACK_MESSAGE, 0);
    for (k, v) in [
        ("consumerGroup", GROUP.to_owned()),
        ("topic", extra_info::real_topic("T", GROUP, &info.retry)),
        ("queueId", p.queue_id.to_string()),
        ("extraInfo", p.extra_info.clone()),
        ("offset", p.offset.to_string()),
    ] {
        r.ext_fields.insert(k.into(), v);
    }
    r
}

fn ack(c: &mut RemotingClient, p: &Popped) {
    let r = c.invoke(ack_request(p), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

/// Pops until `want` messages came back or 15 s passed.
fn pop_until(c: &mut RemotingClient, want: usize, invisible_ms: i64) -> Vec<Popped> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        got.extend(pop(c, 32, invisible_ms, 2000).1);
    }
    got
}

#[test]
fn a_pop_hands_each_message_out_once_with_offsets_the_client_acks_by() {
    let (_b, mut c) = broker();
    for body in [b"a", b"b", b"c"] {
        send(&mut c, body);
    }
    let (code, got) = pop(&mut c, 32, 60_000, 0);
    assert_eq!(code, response_code::SUCCESS);
    let bodies: Vec<&[u8]> = got.iter().map(|p| p.body.as_slice()).collect();
    assert_eq!(bodies, [b"a", b"b", b"c"]);
    assert!(got.iter().all(|p| p.topic == "T" && p.reconsume_times == 0));
    // Invisible to the group's next pop: nothing is left.
    let (code, again) = pop(&mut c, 32, 60_000, 0);
    assert_eq!((code, again.len()), (response_code::POLLING_TIMEOUT, 0));
    for p in &got {
        ack(&mut c, p);
    }
}

#[test]
fn a_message_not_acked_in_time_comes_back_from_the_retry_topic_and_an_acked_one_does_not() {
    let (_b, mut c) = broker();
    send(&mut c, b"acked");
    send(&mut c, b"dropped");
    let (_, got) = pop(&mut c, 32, 1000, 0);
    assert_eq!(got.len(), 2);
    ack(&mut c, &got[0]);
    let back = pop_until(&mut c, 1, 60_000);
    assert_eq!(back.len(), 1, "the message not acked comes back once");
    let p = &back[0];
    assert_eq!(
        (p.body.as_slice(), p.topic.as_str()),
        (&b"dropped"[..], "T")
    );
    assert_eq!(p.reconsume_times, 1);
    assert!(
        p.extra_info.split(' ').nth(4) == Some("1"),
        "{}",
        p.extra_info
    );
    // Acked where it came from (the retry topic), it stays done.
    ack(&mut c, p);
    assert!(pop_until(&mut c, 1, 60_000).is_empty());
}

#[test]
fn a_longer_invisible_time_keeps_a_message_away_and_a_shorter_one_brings_it_back() {
    let (_b, mut c) = broker();
    send(&mut c, b"m");
    let (_, got) = pop(&mut c, 1, 60_000, 0);
    let p = &got[0];
    let mut r = RemotingCommand::request(request_code::CHANGE_MESSAGE_INVISIBLETIME, 0);
    for (k, v) in [
        ("consumerGroup", GROUP.to_owned()),
        ("topic", "T".to_owned()),
        ("queueId", p.queue_id.to_string()),
        ("extraInfo", p.extra_info.clone()),
        ("offset", p.offset.to_string()),
        ("invisibleTime", "500".to_owned()),
    ] {
        r.ext_fields.insert(k.into(), v);
    }
    let r = c.invoke(r, TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: ChangeInvisibleTimeResponseHeader = r.decode_custom_header().unwrap();
    assert_eq!(h.invisible_time, 500);
    let back = pop_until(&mut c, 1, 60_000);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].body, b"m");
}

#[test]
fn a_held_pop_is_answered_by_the_next_arrival() {
    let (b, mut c) = broker();
    let addr = b.controller.local_addr();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        send(&mut client(addr), b"late");
    });
    let started = Instant::now();
    let (code, got) = pop(&mut c, 32, 60_000, 20_000);
    sender.join().unwrap();
    assert_eq!(code, response_code::SUCCESS);
    assert_eq!(got[0].body, b"late");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "woken, not timed out"
    );
}

#[test]
fn a_pop_without_a_born_time_as_the_proxy_sends_it_is_held_for_its_poll_time() {
    let (b, mut c) = broker();
    let addr = b.controller.local_addr();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        send(&mut client(addr), b"late");
    });
    let mut request = pop_request(32, 60_000, 20_000);
    request.ext_fields.insert("bornTime".into(), "0".into());
    let (code, got) = pop_with(&mut c, request, 20_000);
    sender.join().unwrap();
    assert_eq!(code, response_code::SUCCESS);
    assert_eq!(got[0].body, b"late");
}

#[test]
fn an_orderly_pop_holds_its_queue_until_acked_and_hands_out_again_what_was_not() {
    let (_b, mut c) = broker();
    for body in [b"1", b"2", b"3"] {
        send(&mut c, body);
    }
    let (code, got, counts) = pop_full(&mut c, order_pop(32, 60_000, "a1"), 0);
    assert_eq!(code, response_code::SUCCESS);
    let bodies: Vec<&[u8]> = got.iter().map(|p| p.body.as_slice()).collect();
    assert_eq!(bodies, [b"1", b"2", b"3"]);
    assert_eq!(counts.as_deref(), Some("0 0 0"), "first delivery of each");
    assert!(got
        .iter()
        .all(|p| p.extra_info.split(' ').nth(3) == Some("999")));
    // Another attempt is held off while any of them is unacked and invisible.
    let (code, _, _) = pop_full(&mut c, order_pop(32, 60_000, "a2"), 0);
    assert_eq!(code, response_code::POLLING_TIMEOUT);
    ack(&mut c, &got[0]);
    ack(&mut c, &got[1]);
    let (code, _, _) = pop_full(&mut c, order_pop(32, 60_000, "a3"), 0);
    assert_eq!(
        code,
        response_code::POLLING_TIMEOUT,
        "the third still holds the queue"
    );
    ack(&mut c, &got[2]);
    send(&mut c, b"4");
    let (_, next, _) = pop_full(&mut c, order_pop(32, 500, "a4"), 0);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].body, b"4");
    // Not acked within its invisible time: the same message again, counted once more.
    std::thread::sleep(Duration::from_millis(700));
    let (_, again, counts) = pop_full(&mut c, order_pop(32, 60_000, "a5"), 0);
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].body.as_slice(), again[0].offset),
        (&b"4"[..], next[0].offset)
    );
    assert_eq!(counts.as_deref(), Some("0 qo0%3 1;0 0 1"));
    // An ack of the old pop (its pop time is not the queue's last) changes nothing.
    ack(&mut c, &next[0]);
    let (code, _, _) = pop_full(&mut c, order_pop(32, 60_000, "a6"), 0);
    assert_eq!(code, response_code::POLLING_TIMEOUT);
    ack(&mut c, &again[0]);
    let (code, _, _) = pop_full(&mut c, order_pop(32, 60_000, "a7"), 0);
    assert_eq!(code, response_code::POLLING_TIMEOUT, "nothing left");
}

#[test]
fn bad_pops_and_acks_get_rocketmqs_codes_and_name_the_field() {
    let (_b, mut c) = broker();
    send(&mut c, b"m");
    let refused = |c: &mut RemotingClient, r: RemotingCommand| {
        let r = c.invoke(r, TIMEOUT).unwrap();
        (r.code, r.remark.unwrap_or_default())
    };
    let (code, remark) = refused(&mut c, pop_request(33, 1000, 0));
    assert_eq!(code, response_code::INVALID_PARAMETER);
    assert!(remark.contains("maxMsgNums 33"), "{remark}");
    let (code, remark) = refused(&mut c, pop_request(1, -1, 0));
    assert_eq!(code, response_code::INVALID_PARAMETER);
    assert!(remark.contains("invisibleTime -1"), "{remark}");
    let (_, got) = pop(&mut c, 1, 60_000, 0);
    let mut garbled = ack_request(&got[0]);
    garbled
        .ext_fields
        .insert("extraInfo".into(), "0 x 1000 0 0 broker-a".into());
    let (code, remark) = refused(&mut c, garbled);
    assert_eq!(code, response_code::MESSAGE_ILLEGAL);
    assert!(remark.contains("popTime \"x\""), "{remark}");
    let mut outside = ack_request(&got[0]);
    outside.ext_fields.insert("offset".into(), "99".into());
    let (code, remark) = refused(&mut c, outside);
    assert_eq!(code, response_code::NO_MESSAGE);
    assert!(remark.contains("commit:99, store:0~1"), "{remark}");
    let mut foreign = ack_request(&got[0]);
    let mut fields: Vec<&str> = got[0].extra_info.split(' ').collect();
    fields[3] = "70";
    foreign
        .ext_fields
        .insert("extraInfo".into(), fields.join(" "));
    let (code, remark) = refused(&mut c, foreign);
    assert_eq!(code, response_code::MESSAGE_ILLEGAL);
    assert!(remark.contains("revive queue 70"), "{remark}");
}

#[test]
fn an_orderly_pop_of_every_queue_leaves_the_offset_at_its_start() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    c.invoke(create_topic("T", 4), TIMEOUT).unwrap();
    let (code, _, _) = pop_full(&mut c, order_pop(16, 15_000, "x0"), 0);
    assert_eq!(code, response_code::POLLING_TIMEOUT);
    for body in [b"1", b"2", b"3"] {
        let r = c.invoke(send_v2("T", 1, body), TIMEOUT).unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
    }
    let (_, got, counts) = pop_full(&mut c, order_pop(16, 15_000, "x1"), 0);
    assert_eq!((got.len(), counts.as_deref()), (3, Some("0 1 0")));
    let mut q = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET, 0);
    for (k, v) in [("consumerGroup", GROUP), ("topic", "T"), ("queueId", "1")] {
        q.ext_fields.insert(k.into(), v.into());
    }
    let r = c.invoke(q, TIMEOUT).unwrap();
    assert_eq!(r.ext_fields.get("offset").map(String::as_str), Some("0"));
}
