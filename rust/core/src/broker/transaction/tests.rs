//! The transaction service on a store, without a network: prepare, end, check rounds and the
//! rebuild after a restart, with the requests built as a Java producer builds them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::bridge::{HalfInfo, CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC};
use super::end::Ended;
use super::*;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::BrokerSettings;
use crate::commitlog::record::{encode_properties, MessageDraft};
use crate::commitlog::transaction::sys_flag;
use crate::remoting::{request_code, response_code};
use crate::store::StoreConfig;

const GROUP: &str = "tx-group";

pub(crate) fn service(
    store: &Arc<MessageStore>,
    settings: &BrokerSettings,
) -> TransactionalMessageService {
    let root = &store.config().root;
    TransactionalMessageService::new(
        store.clone(),
        Arc::new(TopicConfigManager::load(root, settings).unwrap()),
        Arc::default(),
        Arc::new(ConsumerOffsetManager::load(root).unwrap()),
        settings.transaction,
        settings.broker_name.clone(),
    )
}

fn open(dir: &Path) -> Arc<MessageStore> {
    let mut config = StoreConfig::new(dir);
    config.mapped_file_size = 64 * 1024;
    Arc::new(MessageStore::open(config).unwrap())
}

fn settings(check_max: i32) -> BrokerSettings {
    let mut s = BrokerSettings::default();
    s.transaction.time_out = Duration::from_millis(0);
    s.transaction.check_max = check_max;
    s
}

fn properties(uniq: &str) -> Vec<u8> {
    encode_properties([
        ("TRAN_MSG", "true"),
        ("PGROUP", GROUP),
        ("UNIQ_KEY", uniq),
        ("KEYS", uniq),
    ])
    .unwrap()
}

/// A half message sent at `born`; its (commit log offset, queue offset).
fn prepare(tx: &TransactionalMessageService, uniq: &str, born: i64) -> (i64, i64) {
    let props = properties(uniq);
    let draft = MessageDraft {
        topic: "Orders",
        body: uniq.as_bytes(),
        properties: &props,
        queue_id: 2,
        flag: 0,
        sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: born,
        born_host: "10.0.0.1:5000".parse().unwrap(),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    };
    let r = tx.prepare(&draft, GROUP).unwrap();
    (r.offset as i64, r.queue_offset)
}

fn end_request(offset: (i64, i64), outcome: i32) -> RemotingCommand {
    let mut request = RemotingCommand::request(request_code::END_TRANSACTION, 1);
    for (k, v) in [
        ("producerGroup", GROUP.to_owned()),
        ("commitLogOffset", offset.0.to_string()),
        ("tranStateTableOffset", offset.1.to_string()),
        ("commitOrRollback", outcome.to_string()),
        ("fromTransactionCheck", "false".to_owned()),
        ("msgId", "m".to_owned()),
    ] {
        request.ext_fields.insert(k.into(), v);
    }
    request
}

fn end(tx: &TransactionalMessageService, offset: (i64, i64), outcome: i32) -> (i32, String) {
    match tx.end_transaction(&end_request(offset, outcome)) {
        Ended::Now(r) | Ended::AfterPut(r, _) => (r.code, r.remark.unwrap_or_default()),
        Ended::Silent => (-1, String::new()),
    }
}

fn bodies(store: &MessageStore, topic: &str, queue_id: i32) -> Vec<String> {
    let Some(cq) = store.consume_queue(topic, queue_id) else {
        return Vec::new();
    };
    cq.get(0, 1000)
        .into_iter()
        .map(|(_, e)| {
            let r = store
                .look_message_by_offset(e.commitlog_offset as u64)
                .unwrap();
            String::from_utf8_lossy(r.view().body).into_owned()
        })
        .collect()
}

/// The half message (or the copy) a check round put back last for `uniq`.
fn latest_copy(store: &MessageStore, uniq: &str) -> (i64, i64) {
    let cq = store.consume_queue(HALF_TOPIC, 0).unwrap();
    cq.get(0, 1000)
        .into_iter()
        .rev()
        .find_map(|(qo, e)| {
            let r = store.look_message_by_offset(e.commitlog_offset as u64)?;
            let info = HalfInfo::of(&r.view())?;
            (info.uniq_key.as_deref() == Some(uniq)).then_some((e.commitlog_offset, qo))
        })
        .unwrap()
}

#[test]
fn a_commit_writes_the_message_to_its_real_queue_and_a_rollback_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let tx = service(&store, &settings(15));
    let a = prepare(&tx, "a", now_millis());
    let b = prepare(&tx, "b", now_millis());
    assert!(
        bodies(&store, "Orders", 2).is_empty(),
        "a half message is invisible"
    );
    assert_eq!(
        end(&tx, a, sys_flag::TRANSACTION_COMMIT_TYPE).0,
        response_code::SUCCESS
    );
    assert_eq!(
        end(&tx, b, sys_flag::TRANSACTION_ROLLBACK_TYPE).0,
        response_code::SUCCESS
    );
    assert_eq!(end(&tx, b, 0).0, -1, "unknown is not answered");
    assert_eq!(bodies(&store, "Orders", 2), ["a"]);
    assert_eq!(bodies(&store, OP_TOPIC, 0).len(), 2);
    let cq = store.consume_queue("Orders", 2).unwrap();
    let (_, e) = cq.get(0, 1)[0];
    let committed = store
        .look_message_by_offset(e.commitlog_offset as u64)
        .unwrap();
    let v = committed.view();
    assert_eq!(v.prepared_tx_offset, a.0);
    assert_eq!(
        v.sys_flag & sys_flag::MASK,
        sys_flag::TRANSACTION_COMMIT_TYPE
    );
    assert!(crate::commitlog::record::find_property(v.properties, "REAL_TOPIC").is_none());
    assert_eq!(tx.pending_count(), 0);
}

#[test]
fn a_late_end_of_the_original_ends_the_copy_a_check_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let tx = service(&store, &settings(15));
    let original = prepare(&tx, "late", now_millis() - 1);
    tx.check_round(now_millis());
    let copy = latest_copy(&store, "late");
    assert_ne!(copy, original, "the check put a copy back");
    // The producer's own commit of the original arrives after the copy: it ends the
    // transaction, and the check's answer (a commit of the copy) is a repeat.
    assert_eq!(
        end(&tx, original, sys_flag::TRANSACTION_COMMIT_TYPE).0,
        response_code::SUCCESS
    );
    assert_eq!(
        end(&tx, copy, sys_flag::TRANSACTION_COMMIT_TYPE).0,
        response_code::SUCCESS
    );
    let (code, remark) = end(&tx, copy, sys_flag::TRANSACTION_ROLLBACK_TYPE);
    assert_eq!(code, response_code::ILLEGAL_OPERATION, "{remark}");
    tx.check_round(now_millis());
    assert_eq!(bodies(&store, "Orders", 2), ["late"], "committed once");
}

#[test]
fn unanswered_checks_discard_after_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let tx = service(&store, &settings(2));
    prepare(&tx, "lost", now_millis() - 1);
    for _ in 0..5 {
        tx.check_round(now_millis());
    }
    assert_eq!(bodies(&store, CHECK_MAX_TIME_TOPIC, 0), ["lost"]);
    // Registered as RocketMQ registers them, so routes and topicList have them.
    for topic in [HALF_TOPIC, OP_TOPIC, CHECK_MAX_TIME_TOPIC] {
        assert!(tx.topics.select(topic).is_some(), "{topic}");
    }
    // The original and two copies (checked twice), then discarded with an op.
    assert_eq!(bodies(&store, HALF_TOPIC, 0).len(), 3);
    assert_eq!(tx.pending_count(), 0);
    assert!(bodies(&store, "Orders", 2).is_empty());
}

#[test]
fn a_restart_finds_exactly_the_pending_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(15);
    let (committed, late, open_one);
    {
        let store = open(dir.path());
        let tx = service(&store, &settings);
        committed = prepare(&tx, "committed", now_millis() - 1);
        late = prepare(&tx, "late", now_millis() - 1);
        // Not due in this test: born in a minute.
        open_one = prepare(&tx, "open", now_millis() + 60_000);
        tx.check_round(now_millis());
        assert_eq!(end(&tx, committed, sys_flag::TRANSACTION_COMMIT_TYPE).0, 0);
        // The original of a transaction whose copy was put back.
        assert_eq!(end(&tx, late, sys_flag::TRANSACTION_ROLLBACK_TYPE).0, 0);
        tx.record_progress();
        store.close().unwrap();
    }
    let store = open(dir.path());
    let tx = Arc::new(service(&store, &settings));
    tx.recover();
    assert_eq!(tx.pending_count(), 1, "only 'open' waits");
    let (code, remark) = end(&tx, late, sys_flag::TRANSACTION_COMMIT_TYPE);
    assert_eq!(code, response_code::ILLEGAL_OPERATION, "{remark}");
    assert_eq!(end(&tx, open_one, sys_flag::TRANSACTION_COMMIT_TYPE).0, 0);
    assert_eq!(bodies(&store, "Orders", 2), ["committed", "open"]);
}

#[test]
fn bad_ends_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let tx = service(&store, &settings(15));
    let half = prepare(&tx, "x", now_millis());
    let cases: [((i64, i64), &str); 3] = [
        (
            (half.0 + 1, half.1),
            "Find prepared transaction message failed",
        ),
        ((half.0, half.1 + 3), "state table offset wrong"),
        ((-1, 0), "no message at commit log offset -1"),
    ];
    for (offset, want) in cases {
        let (code, remark) = end(&tx, offset, sys_flag::TRANSACTION_COMMIT_TYPE);
        assert_eq!(code, response_code::SYSTEM_ERROR);
        assert!(remark.contains(want), "{remark}");
    }
    let mut wrong_group = end_request(half, sys_flag::TRANSACTION_COMMIT_TYPE);
    wrong_group
        .ext_fields
        .insert("producerGroup".into(), "other".into());
    let Ended::Now(r) = tx.end_transaction(&wrong_group) else {
        panic!("answered at once");
    };
    assert!(r.remark.unwrap().contains("producer group wrong"));
    assert_eq!(tx.pending_count(), 1, "nothing ended");
}
