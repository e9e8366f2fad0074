use std::net::IpAddr;

use super::*;
use crate::acl::plain_access_validator::{parse, PlainAccessValidator};
use crate::acl::{AclClientRpcHook, SessionCredentials};
use crate::remoting::client::RpcHook;
use crate::remoting::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use crate::remoting::{request_code, RemotingCommand};

const ACL: &str = "
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 87654321
    whiteRemoteAddress: 192.168.1.*
    admin: true
";

fn local() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn signed(request: &mut RemotingCommand, access_key: &str, secret_key: &str) {
    AclClientRpcHook {
        credentials: SessionCredentials {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        },
    }
    .do_before_request(request);
}

fn send(topic: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::SEND_MESSAGE_V2, 1);
    r.ext_fields.insert("a".into(), "producerGroup".into());
    r.ext_fields.insert("b".into(), topic.into());
    r.body = b"hello".to_vec();
    r
}

fn pull(topic: &str, group: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::PULL_MESSAGE, 1);
    r.ext_fields.insert("topic".into(), topic.into());
    r.ext_fields.insert("consumerGroup".into(), group.into());
    r
}

fn check(policy: &Policy, request: &RemotingCommand, from: IpAddr) -> Result<(), String> {
    policy.validate(&parse(request).unwrap(), from)
}

#[test]
fn right_keys_pass_and_permissions_are_checked() {
    let policy = Policy::parse(ACL).unwrap();
    let mut ok = send("topicB");
    signed(&mut ok, "RocketMQ", "12345678");
    assert_eq!(check(&policy, &ok, local()), Ok(()));

    for (topic, why) in [
        ("topicA", "No PUB permission for topic topicA"),
        ("topicC", "No PUB permission for topic topicC"),
        // Not listed: defaultTopicPerm DENY.
        ("other", "No PUB permission for topic other"),
    ] {
        let mut r = send(topic);
        signed(&mut r, "RocketMQ", "12345678");
        let e = check(&policy, &r, local()).unwrap_err();
        assert!(e.contains(why), "{topic}: {e}");
    }

    let mut r = pull("topicC", "groupB");
    signed(&mut r, "RocketMQ", "12345678");
    assert_eq!(check(&policy, &r, local()), Ok(()));
    let mut r = pull("topicC", "groupA");
    signed(&mut r, "RocketMQ", "12345678");
    let e = check(&policy, &r, local()).unwrap_err();
    assert!(e.contains("No SUB permission for group groupA"), "{e}");
}

#[test]
fn a_wrong_secret_a_changed_field_or_an_unknown_key_is_refused() {
    let policy = Policy::parse(ACL).unwrap();
    let mut r = send("topicB");
    signed(&mut r, "RocketMQ", "wrong-secret");
    let e = check(&policy, &r, local()).unwrap_err();
    assert_eq!(e, "Check signature failed for accessKey=RocketMQ");

    let mut r = send("topicB");
    signed(&mut r, "RocketMQ", "12345678");
    r.body = b"tampered".to_vec();
    assert!(check(&policy, &r, local()).is_err());

    let mut r = send("topicB");
    signed(&mut r, "nobody-here", "12345678");
    assert_eq!(
        check(&policy, &r, local()),
        Err("No acl config for nobody-here".into())
    );
    assert_eq!(
        check(&policy, &send("topicB"), local()),
        Err("No accessKey is configured".into())
    );
}

#[test]
fn white_addresses_and_admins() {
    let policy = Policy::parse(ACL).unwrap();
    // A global white address needs no signature at all.
    assert_eq!(
        check(&policy, &send("x"), "10.10.103.7".parse().unwrap()),
        Ok(())
    );
    // An account's white address needs its key but no signature.
    let mut r = send("x");
    r.ext_fields.insert("AccessKey".into(), "rocketmq2".into());
    assert_eq!(check(&policy, &r, "192.168.1.9".parse().unwrap()), Ok(()));
    assert!(check(&policy, &r, local()).is_err());

    let mut create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC, 1);
    create.ext_fields.insert("topic".into(), "t".into());
    let mut by_user = create.clone();
    signed(&mut by_user, "RocketMQ", "12345678");
    let e = check(&policy, &by_user, local()).unwrap_err();
    assert!(
        e.contains("Need admin permission for request code=17"),
        "{e}"
    );
    signed(&mut create, "rocketmq2", "87654321");
    assert_eq!(check(&policy, &create, local()), Ok(()));
    // Deleting a topic or a group, and changing the broker's config, are admin requests too.
    for code in [
        request_code::DELETE_TOPIC_IN_BROKER,
        request_code::DELETE_SUBSCRIPTIONGROUP,
        request_code::UPDATE_BROKER_CONFIG,
    ] {
        let mut request = RemotingCommand::request(code, 1);
        request.ext_fields.insert("topic".into(), "t".into());
        signed(&mut request, "RocketMQ", "12345678");
        let e = check(&policy, &request, local()).unwrap_err();
        assert!(e.contains("Need admin permission"), "{code}: {e}");
    }
}

/// The Java client's headers carry the same names; a send built by rocketha's own header
/// type signs and verifies.
#[test]
fn a_signed_send_header_round_trips() {
    let policy = Policy::parse(ACL).unwrap();
    let mut r = RemotingCommand::request(request_code::SEND_MESSAGE_V2, 1);
    r.write_custom_header(&SendMessageRequestHeaderV2(SendMessageRequestHeader {
        producer_group: "g".into(),
        topic: "topicB".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1,
        flag: 0,
        properties: Some("KEYS\u{1}k\u{2}".into()),
        reconsume_times: Some(0),
        unit_mode: None,
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: None,
    }));
    signed(&mut r, "RocketMQ", "12345678");
    assert_eq!(check(&policy, &r, local()), Ok(()));
}

#[test]
fn bad_files_name_the_problem() {
    for (text, why) in [
        ("accounts: 3", "accounts: expected a list"),
        (
            "accounts:\n  - accessKey: short\n    secretKey: 12345678",
            "accessKey must be set and longer than 6",
        ),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [a=READ]",
            "permission \"READ\"",
        ),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [a]",
            "is not Name=PERM",
        ),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admn: true",
            "unknown key \"admn\"",
        ),
        ("globalWhiteRemoteAddresses: [10.0.0]", "four parts"),
        ("acounts: []", "unknown key \"acounts\""),
    ] {
        let e = Policy::parse(text).unwrap_err();
        assert!(e.contains(why), "{text}: {e}");
    }
}

#[test]
fn reload_takes_a_changed_file_and_keeps_the_policy_on_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain_acl.yml");
    std::fs::write(&path, ACL).unwrap();
    let validator = PlainAccessValidator {
        manager: PlainPermissionManager::load(&path).unwrap(),
    };
    assert_eq!(validator.manager.reload_if_changed(), None);
    let mut r = send("topicNew");
    signed(&mut r, "RocketMQ", "12345678");
    assert!(validator.validate(&r, local()).is_err());

    std::fs::write(&path, ACL.replace("topicC=SUB", "topicNew=PUB")).unwrap();
    let summary = validator.manager.reload_if_changed().unwrap().unwrap();
    assert!(summary.contains("reloaded, 2 accounts"), "{summary}");
    assert_eq!(validator.validate(&r, local()), Ok(()));

    std::fs::write(&path, "accounts: [").unwrap();
    let e = validator.manager.reload_if_changed().unwrap().unwrap_err();
    assert!(e.contains("stays in force"), "{e}");
    assert_eq!(validator.validate(&r, local()), Ok(()));
    // Reported once per change.
    assert_eq!(validator.manager.reload_if_changed(), None);

    // An edit of the same size right after the last one is seen too, whatever the timestamps.
    let allowed = ACL.replace("topicC=SUB", "topicNew=PUB");
    std::fs::write(&path, &allowed).unwrap();
    assert!(validator.manager.reload_if_changed().unwrap().is_ok());
    std::fs::write(&path, allowed.replace("topicNew=PUB", "topicNew=SUB")).unwrap();
    assert!(validator.manager.reload_if_changed().unwrap().is_ok());
    assert!(validator.validate(&r, local()).is_err());

    let e = PlainPermissionManager::load(&dir.path().join("missing.yml"))
        .err()
        .unwrap();
    assert!(e.to_string().contains("missing.yml"), "{e}");
}
