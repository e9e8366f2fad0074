//! The operators' requests over a real socket, as `mqadmin` sends them.

use std::time::Duration;

use crate::broker::controller::tests::{
    client, create_topic, route, send_v2, start, wait_for, Broker, TIMEOUT,
};
use crate::broker::processor::pull::tests::pull;
use crate::broker::BrokerControllerConfig;
use crate::namesrv::{NameServer, NamesrvConfig};
use crate::remoting::header::{
    pull_sys_flag, DeleteSubscriptionGroupRequestHeader, DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader, GetSubscriptionGroupConfigRequestHeader, QueueRequestHeader,
};
use crate::remoting::{request_code, response_code, RemotingClient, RemotingCommand};

/// A name server, and a broker registered with it that registers again only when its topics
/// change (its period is an hour).
fn registered_broker() -> (NameServer, Broker) {
    let ns = NameServer::start("127.0.0.1:0".parse().unwrap(), NamesrvConfig::default()).unwrap();
    let config = BrokerControllerConfig {
        namesrv_addr: ns.local_addr().to_string(),
        register_name_server_period: Duration::from_secs(3600),
        ..BrokerControllerConfig::default()
    };
    (ns, start(config, 0, None))
}

fn update_config(c: &mut RemotingClient, body: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG, 0);
    request.body = body.as_bytes().to_vec();
    c.invoke(request, TIMEOUT).unwrap()
}

fn broker_config(c: &mut RemotingClient) -> String {
    let request = RemotingCommand::request(request_code::GET_BROKER_CONFIG, 0);
    let response = c.invoke(request, TIMEOUT).unwrap();
    assert_eq!(
        response.code,
        response_code::SUCCESS,
        "{:?}",
        response.remark
    );
    String::from_utf8(response.body).unwrap()
}

#[test]
fn a_runtime_update_changes_the_live_keys_and_refuses_the_others_whole() {
    let (ns, b) = registered_broker();
    let mut c = client(b.controller.local_addr());
    assert_eq!(c.invoke(create_topic("T", 2), TIMEOUT).unwrap().code, 0);
    assert!(broker_config(&mut c).contains("brokerPermission=6\n"));

    // One refused key refuses the whole update: nothing of it is applied.
    let r = update_config(&mut c, "brokerPermission=4\nlistenPort=1234\n");
    assert_eq!(r.code, response_code::NO_PERMISSION);
    let remark = r.remark.unwrap();
    assert!(
        remark.starts_with("listenPort may not change while the broker runs"),
        "{remark}"
    );
    assert!(broker_config(&mut c).contains("brokerPermission=6\n"));
    let r = update_config(&mut c, "brokerPermision=4");
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r
        .remark
        .unwrap()
        .contains("did you mean 'brokerPermission'"));
    let r = update_config(&mut c, "maxMessageSize=big");
    assert!(r
        .remark
        .unwrap()
        .starts_with("maxMessageSize: bad value 'big'"));

    // Read-only: sends are refused, and the name server routes no writes here.
    assert_eq!(update_config(&mut c, "brokerPermission=4").code, 0);
    assert!(broker_config(&mut c).contains("brokerPermission=4\n"));
    let sent = c.invoke(send_v2("T", 0, b"x"), TIMEOUT).unwrap();
    assert_eq!(sent.code, response_code::NO_PERMISSION, "{:?}", sent.remark);
    wait_for("the read-only route", || {
        route(&ns, "T").filter(|r| r.queue_datas[0].perm == 4)
    });
    assert_eq!(update_config(&mut c, "brokerPermission=6").code, 0);
    let sent = c.invoke(send_v2("T", 0, b"x"), TIMEOUT).unwrap();
    assert_eq!(sent.code, response_code::SUCCESS, "{:?}", sent.remark);
}

fn group_request(code: i32, group: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(code, 0);
    match code {
        request_code::GET_SUBSCRIPTIONGROUP_CONFIG => {
            request.write_custom_header(&GetSubscriptionGroupConfigRequestHeader {
                group: group.into(),
            })
        }
        _ => request.write_custom_header(&DeleteSubscriptionGroupRequestHeader {
            group_name: group.into(),
            clean_offset: true,
        }),
    }
    request
}

#[test]
fn subscription_groups_are_created_read_and_deleted_with_their_offsets() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let mut create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0);
    create.body =
        br#"{"groupName":"cg","retryMaxTimes":3,"consumeBroadcastEnable":false}"#.to_vec();
    let r = c.invoke(create.clone(), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let got = c.invoke(
        group_request(request_code::GET_SUBSCRIPTIONGROUP_CONFIG, "cg"),
        TIMEOUT,
    );
    let got: serde_json::Value = serde_json::from_slice(&got.unwrap().body).unwrap();
    assert_eq!(
        (
            got["retryMaxTimes"].as_i64(),
            got["retryQueueNums"].as_i64()
        ),
        (Some(3), Some(1))
    );

    b.controller
        .processor
        .consume
        .offsets
        .commit_offset("cg", "T", 0, 5);
    b.controller
        .processor
        .consume
        .offsets
        .commit_offset("other", "T", 0, 7);
    let r = c.invoke(
        group_request(request_code::DELETE_SUBSCRIPTIONGROUP, "cg"),
        TIMEOUT,
    );
    assert_eq!(r.unwrap().code, response_code::SUCCESS);
    let offsets = &b.controller.processor.consume.offsets;
    assert_eq!(offsets.query_offset("cg", "T", 0), None);
    assert_eq!(offsets.query_offset("other", "T", 0), Some(7));
    let r = c.invoke(
        group_request(request_code::GET_SUBSCRIPTIONGROUP_CONFIG, "cg"),
        TIMEOUT,
    );
    let r = r.unwrap();
    assert_eq!(r.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert_eq!(r.remark.as_deref(), Some("No group cg in this broker"));

    create.body = br#"{"groupName":"bad group"}"#.to_vec();
    let r = c.invoke(create, TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::INVALID_PARAMETER);
    assert!(r.remark.unwrap().contains("contains illegal characters"));
}

fn max_offset(c: &mut RemotingClient, topic: &str) -> i64 {
    let mut request = RemotingCommand::request(request_code::GET_MAX_OFFSET, 0);
    request.write_custom_header(&QueueRequestHeader {
        topic: topic.into(),
        queue_id: 0,
    });
    let response = c.invoke(request, TIMEOUT).unwrap();
    response.ext_fields["offset"].parse().unwrap()
}

fn delete_topic(c: &mut RemotingClient, topic: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER, 0);
    request.write_custom_header(&DeleteTopicRequestHeader {
        topic: topic.into(),
    });
    c.invoke(request, TIMEOUT).unwrap()
}

#[test]
fn a_topic_asked_with_more_queues_than_the_cap_is_refused_and_not_created() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let r = c.invoke(create_topic("Wide", 100_000), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(
        r.remark.as_deref().unwrap_or_default().contains(
            "readQueueNums 100000 and writeQueueNums 100000 may be at most 1024 (maxTopicQueueNums)"
        ),
        "{:?}",
        r.remark
    );
    assert!(b.controller.topics.select("Wide").is_none());
    let r = c.invoke(create_topic("Wide", 1024), TIMEOUT).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

#[test]
fn a_deleted_topic_leaves_the_broker_and_the_name_server() {
    let (ns, b) = registered_broker();
    let mut c = client(b.controller.local_addr());
    assert_eq!(c.invoke(create_topic("T", 1), TIMEOUT).unwrap().code, 0);
    for _ in 0..3 {
        assert_eq!(c.invoke(send_v2("T", 0, b"x"), TIMEOUT).unwrap().code, 0);
    }
    b.controller
        .processor
        .consume
        .offsets
        .commit_offset("cg", "T", 0, 2);
    wait_for("the topic's route", || route(&ns, "T"));

    let r = delete_topic(&mut c, "T");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(max_offset(&mut c, "T"), 0);
    assert!(b.controller.topics.select("T").is_none());
    assert_eq!(
        b.controller
            .processor
            .consume
            .offsets
            .query_offset("cg", "T", 0),
        None
    );
    let mut ns_client = client(ns.local_addr());
    let mut request = RemotingCommand::request(request_code::DELETE_TOPIC_IN_NAMESRV, 0);
    request.write_custom_header(&DeleteTopicFromNamesrvRequestHeader {
        topic: "T".into(),
        cluster_name: Some("DefaultCluster".into()),
    });
    assert_eq!(ns_client.invoke(request, TIMEOUT).unwrap().code, 0);
    assert!(route(&ns, "T").is_none());
    // Deleted is not forbidden: an explicit create brings it back, from queue offset 0.
    assert_eq!(c.invoke(create_topic("T", 1), TIMEOUT).unwrap().code, 0);
    assert_eq!(c.invoke(send_v2("T", 0, b"x"), TIMEOUT).unwrap().code, 0);
    assert_eq!(max_offset(&mut c, "T"), 1);

    for system in [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "DefaultCluster",
        "broker-a",
        "rmq_sys_x",
    ] {
        let r = delete_topic(&mut c, system);
        assert_eq!(r.code, response_code::INVALID_PARAMETER, "{system}");
        let remark = r.remark.unwrap();
        assert_eq!(
            remark,
            format!("The topic[{system}] is conflict with system topic.")
        );
    }
}

fn connection_list(c: &mut RemotingClient, code: i32, field: &str, group: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(code, 0);
    request.ext_fields.insert(field.into(), group.into());
    c.invoke(request, TIMEOUT).unwrap()
}

#[test]
fn a_groups_connections_carry_each_clients_address_language_and_subscriptions() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    let mut hb = RemotingCommand::request(request_code::HEART_BEAT, 0);
    hb.version = 453;
    hb.body = br#"{"clientID":"10.0.0.9@1","producerDataSet":[{"groupName":"pg"}],
        "consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY",
        "messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet":[{"topic":"T","subString":"a || b","subVersion":7}]}]}"#
        .to_vec();
    assert_eq!(c.invoke(hb, TIMEOUT).unwrap().code, response_code::SUCCESS);
    // The client's end of the connection: loopback, not the broker's port.
    let me = b.controller.clients()[0].client_addr.clone();
    assert!(me.starts_with("127.0.0.1:") && me != b.controller.local_addr().to_string());

    let r = connection_list(
        &mut c,
        request_code::GET_CONSUMER_CONNECTION_LIST,
        "consumerGroup",
        "cg",
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let connection = &body["connectionSet"][0];
    assert_eq!(connection["clientId"], "10.0.0.9@1");
    assert_eq!(connection["clientAddr"], me.as_str());
    assert_eq!(
        (
            connection["language"].as_str(),
            connection["version"].as_i64()
        ),
        (Some("RUST"), Some(453))
    );
    let sub = &body["subscriptionTable"]["T"];
    assert_eq!(sub["tagsSet"], serde_json::json!(["a", "b"]));
    assert_eq!(sub["subVersion"], 7);
    assert_eq!(body["consumeFromWhere"], "CONSUME_FROM_LAST_OFFSET");

    let r = connection_list(
        &mut c,
        request_code::GET_PRODUCER_CONNECTION_LIST,
        "producerGroup",
        "pg",
    );
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["connectionSet"][0]["clientAddr"], me.as_str());

    let r = connection_list(
        &mut c,
        request_code::GET_CONSUMER_CONNECTION_LIST,
        "consumerGroup",
        "nobody",
    );
    assert_eq!(r.code, response_code::CONSUMER_NOT_ONLINE);
    assert_eq!(
        r.remark.as_deref(),
        Some("the consumer group[nobody] not online")
    );
    let r = connection_list(
        &mut c,
        request_code::GET_PRODUCER_CONNECTION_LIST,
        "producerGroup",
        "nobody",
    );
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        r.remark.as_deref(),
        Some("the producer group[nobody] not exist")
    );
}

fn reset(c: &mut RemotingClient, fields: &[(&str, &str)]) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET, 0);
    for (k, v) in fields {
        request.ext_fields.insert((*k).into(), (*v).into());
    }
    c.invoke(request, TIMEOUT).unwrap()
}

#[test]
fn a_reset_moves_the_groups_offsets_and_its_next_pull_whatever_it_commits_meanwhile() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    assert_eq!(c.invoke(create_topic("T", 1), TIMEOUT).unwrap().code, 0);
    for _ in 0..3 {
        assert_eq!(
            c.invoke(send_v2("T", 0, b"early"), TIMEOUT).unwrap().code,
            0
        );
    }
    std::thread::sleep(Duration::from_millis(5)); // store times are whole milliseconds
    let middle = crate::protocol::now_millis();
    std::thread::sleep(Duration::from_millis(5));
    for _ in 0..2 {
        assert_eq!(c.invoke(send_v2("T", 0, b"late"), TIMEOUT).unwrap().code, 0);
    }
    let offsets = &b.controller.processor.consume.offsets;
    assert!(b
        .controller
        .processor
        .consume
        .groups
        .find("cg")
        .unwrap()
        .is_some());
    offsets.commit_offset("cg", "T", 0, 5);

    let at = middle.to_string();
    let r = reset(
        &mut c,
        &[
            ("topic", "T"),
            ("group", "cg"),
            ("timestamp", &at),
            ("isForce", "true"),
        ],
    );
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(String::from_utf8(r.body)
        .unwrap()
        .ends_with("\"queueId\":0,\"topic\":\"T\"}:3}}"));
    assert_eq!(offsets.query_offset("cg", "T", 0), Some(3));
    // The running consumer commits its old position: ignored until it pulls.
    let mut commit = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET, 0);
    for (k, v) in [
        ("consumerGroup", "cg"),
        ("topic", "T"),
        ("queueId", "0"),
        ("commitOffset", "5"),
    ] {
        commit.ext_fields.insert(k.into(), v.into());
    }
    let r = c.invoke(commit.clone(), TIMEOUT).unwrap();
    assert_eq!(
        r.remark.as_deref(),
        Some("Offset has been previously reset")
    );
    assert_eq!(offsets.query_offset("cg", "T", 0), Some(3));
    let moved = c
        .invoke(pull("T", 0, 5, 32, 0, Some("*")), TIMEOUT)
        .unwrap();
    assert_eq!(moved.code, response_code::PULL_OFFSET_MOVED);
    assert_eq!(moved.ext_fields["nextBeginOffset"], "3");
    let again = c.invoke(pull("T", 0, 3, 32, 0, Some("*")), TIMEOUT);
    assert_eq!(again.unwrap().code, response_code::SUCCESS);
    assert_eq!(c.invoke(commit, TIMEOUT).unwrap().remark, None);
    assert_eq!(offsets.query_offset("cg", "T", 0), Some(5));

    // A consumer waiting in a held pull at the head: a reset to the start (0) answers it at
    // once, not when its hold times out.
    let addr = b.controller.local_addr();
    let held = std::thread::spawn(move || {
        let pull = pull("T", 0, 5, 32, pull_sys_flag::FLAG_SUSPEND, Some("*"));
        client(addr).invoke(pull, TIMEOUT).unwrap()
    });
    let hold = b.controller.processor.pull().hold_service();
    wait_for("the held pull", || (hold.held() == 1).then_some(()));
    let r = reset(
        &mut c,
        &[("topic", "T"), ("group", "cg"), ("timestamp", "0")],
    );
    assert_eq!(r.code, response_code::SUCCESS);
    let moved = held.join().unwrap();
    assert_eq!(moved.code, response_code::PULL_OFFSET_MOVED);
    assert_eq!(moved.ext_fields["nextBeginOffset"], "0");

    // One queue to an offset; the refusals.
    let one = [
        ("topic", "T"),
        ("group", "cg"),
        ("timestamp", "0"),
        ("queueId", "0"),
    ];
    let r = reset(&mut c, &[&one[..], &[("offset", "1")]].concat());
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(offsets.query_offset("cg", "T", 0), Some(1));
    let r = reset(&mut c, &[&one[..], &[("offset", "9")]].concat());
    assert_eq!(
        r.remark.as_deref(),
        Some("Target offset 9 not in consume queue range [0-5]")
    );
    let r = reset(
        &mut c,
        &[("topic", "Nope"), ("group", "cg"), ("timestamp", "0")],
    );
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (
            response_code::TOPIC_NOT_EXIST,
            Some("Topic Nope does not exist")
        )
    );
    let r = reset(
        &mut c,
        &[("topic", "T"), ("group", "nobody"), ("timestamp", "0")],
    );
    assert_eq!(r.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
}

#[test]
fn who_consumes_a_topic_and_a_brokers_write_permission_wiped_at_the_name_server() {
    let (ns, b) = registered_broker();
    let mut c = client(b.controller.local_addr());
    assert_eq!(c.invoke(create_topic("T", 1), TIMEOUT).unwrap().code, 0);
    let mut hb = RemotingCommand::request(request_code::HEART_BEAT, 0);
    hb.body = br#"{"clientID":"c1","consumerDataSet":[{"groupName":"live",
        "subscriptionDataSet":[{"topic":"T","subString":"*"}]}]}"#
        .to_vec();
    assert_eq!(c.invoke(hb, TIMEOUT).unwrap().code, 0);
    b.controller
        .processor
        .consume
        .offsets
        .commit_offset("gone", "T", 0, 1);
    let mut who = RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO, 0);
    who.ext_fields.insert("topic".into(), "T".into());
    let r = c.invoke(who, TIMEOUT).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["groupList"], serde_json::json!(["gone", "live"]));

    // The heartbeat created the group's retry topic: its registration, which rewrites every
    // route of the broker, is done before the wipe.
    wait_for("the retry topic's route", || route(&ns, "%RETRY%live"));
    let mut ns_client = client(ns.local_addr());
    for (code, field, perm) in [
        (request_code::WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", 4),
        (request_code::ADD_WRITE_PERM_OF_BROKER, "addTopicCount", 6),
    ] {
        let mut request = RemotingCommand::request(code, 0);
        request
            .ext_fields
            .insert("brokerName".into(), "broker-a".into());
        let r = ns_client.invoke(request, TIMEOUT).unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        assert!(r.ext_fields[field].parse::<i32>().unwrap() >= 1);
        assert_eq!(route(&ns, "T").unwrap().queue_datas[0].perm, perm);
    }
}

#[test]
fn a_consume_queue_window_is_answered_with_its_bounds() {
    let b = start(BrokerControllerConfig::default(), 0, None);
    let mut c = client(b.controller.local_addr());
    assert_eq!(c.invoke(create_topic("T", 1), TIMEOUT).unwrap().code, 0);
    for _ in 0..5 {
        assert_eq!(c.invoke(send_v2("T", 0, b"x"), TIMEOUT).unwrap().code, 0);
    }
    let query = |c: &mut RemotingClient, queue: &str, index: &str, group: Option<&str>| {
        let mut request = RemotingCommand::request(request_code::QUERY_CONSUME_QUEUE, 0);
        for (k, v) in [
            ("topic", "T"),
            ("queueId", queue),
            ("index", index),
            ("count", "2"),
        ] {
            request.ext_fields.insert(k.into(), v.into());
        }
        if let Some(g) = group {
            request.ext_fields.insert("consumerGroup".into(), g.into());
        }
        c.invoke(request, TIMEOUT).unwrap()
    };
    let r = query(&mut c, "0", "1", Some("nobody"));
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        (
            body["minQueueIndex"].as_i64(),
            body["maxQueueIndex"].as_i64()
        ),
        (Some(0), Some(5))
    );
    let entries = body["queueData"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    let second = b.store.consume_queue("T", 0).unwrap().get(1, 1)[0].1;
    assert_eq!(entries[0]["physicOffset"], second.commitlog_offset);
    assert_eq!(body["filterData"], "nobody@T is not online!");
    let r = query(&mut c, "3", "0", None);
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (response_code::SYSTEM_ERROR, Some("3@T is not exist!"))
    );
    let r = query(&mut c, "0", "9", None);
    assert!(r
        .remark
        .unwrap()
        .starts_with("Index 9 of 0@T is not exist!"));
}
