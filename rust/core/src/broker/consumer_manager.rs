//! RocketMQ's `ConsumerManager`: the consumers of each group, learned from their heartbeats
//! (`consumerDataSet`), with the subscriptions a pull without its own expression is filtered by.
//! GET_CONSUMER_LIST_BY_GROUP answers a group's client ids, so clients share its queues among
//! themselves. A consumer leaves its group when its connection closes, when it unregisters, or
//! after `channelExpiredTimeout` (120 s) without a heartbeat. Whenever a group's members or
//! subscriptions change, each remaining member is sent NOTIFY_CONSUMER_IDS_CHANGED (oneway) and
//! rebalances at once, rather than at its next 20 s rebalance.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::commitlog::record::tags_hash_code;
use crate::filter::{self, SqlFilter};
pub(crate) use crate::protocol::heartbeat::ConsumerData;
use crate::remoting::{request_code, RemotingCommand, Responder};
use crate::sync::lock;

/// `channelExpiredTimeout`: a consumer silent this long is gone.
pub(crate) const CHANNEL_EXPIRED_TIMEOUT: Duration = Duration::from_secs(120);
/// `SubscriptionData.SUB_ALL`.
const SUB_ALL: &str = "*";

/// A subscription the broker filters by: RocketMQ's `SubscriptionData`. A TAG expression is
/// matched against the consume queue's tag hash (`codeSet`); a SQL92 one, compiled as
/// `ConsumerFilterData` holds it, against each message's properties.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SubscriptionData {
    pub(crate) topic: String,
    pub(crate) sub_string: String,
    /// Empty for `*` and for SQL92: every message passes the consume queue.
    pub(crate) code_set: BTreeSet<i64>,
    pub(crate) sub_version: i64,
    /// The compiled SQL92 expression; `None` for TAG.
    pub(crate) sql: Option<Arc<SqlFilter>>,
}

impl SubscriptionData {
    /// `FilterAPI.build`: `*` (or nothing) takes every message, `a || b` the messages tagged
    /// `a` or `b`; a SQL92 expression is compiled (`ConsumerFilterManager.build`). An
    /// expression naming no tag, malformed SQL92, or another expression type is refused with
    /// the reason.
    pub(crate) fn build(
        topic: &str,
        sub_string: &str,
        expression_type: Option<&str>,
        sub_version: i64,
    ) -> Result<Self, String> {
        match expression_type.filter(|t| !t.is_empty()) {
            None | Some(filter::TAG) => Self::build_tag(topic, sub_string, sub_version),
            Some(filter::SQL92) => {
                let sql = SqlFilter::compile(sub_string).map_err(|e| {
                    format!("SQL92 expression {sub_string:?} of topic {topic}: {e}")
                })?;
                Ok(Self {
                    topic: topic.to_owned(),
                    sub_string: sub_string.trim().to_owned(),
                    code_set: BTreeSet::new(),
                    sub_version,
                    sql: Some(Arc::new(sql)),
                })
            }
            Some(t) => Err(format!(
                "expressionType {t}: unknown expression type; the broker filters by TAG or SQL92"
            )),
        }
    }

    fn build_tag(topic: &str, sub_string: &str, sub_version: i64) -> Result<Self, String> {
        let trimmed = sub_string.trim();
        let mut code_set = BTreeSet::new();
        if !trimmed.is_empty() && trimmed != SUB_ALL {
            for tag in trimmed.split("||").map(str::trim).filter(|t| !t.is_empty()) {
                code_set.insert(tags_hash_code(tag));
            }
            if code_set.is_empty() {
                return Err(format!(
                    "subscription {sub_string:?} of topic {topic}: subString split error, no tag \
                     in it"
                ));
            }
        }
        Ok(Self {
            topic: topic.to_owned(),
            sub_string: if trimmed.is_empty() { SUB_ALL } else { trimmed }.to_owned(),
            code_set,
            sub_version,
            sql: None,
        })
    }

    /// `ExpressionMessageFilter.isMatchedByConsumeQueue`: a TAG expression by tag hash; a
    /// SQL92 one passes every entry, for [`Self::matches_properties`] to decide.
    pub(crate) fn matches(&self, tags_code: i64) -> bool {
        self.code_set.is_empty() || self.code_set.contains(&tags_code)
    }

    /// `ExpressionMessageFilter.isMatchedByCommitLog`: a SQL92 expression over the message's
    /// encoded properties; TAG expressions were decided by the consume queue.
    pub(crate) fn matches_properties(&self, properties: &[u8]) -> bool {
        self.sql.as_ref().is_none_or(|sql| sql.matches(properties))
    }

    /// True when a pull may skip many entries for each one it takes.
    pub(crate) fn is_filtered(&self) -> bool {
        !self.code_set.is_empty() || self.sql.is_some()
    }
}

/// `ClientChannelInfo`.
struct Member {
    client_id: String,
    last_update: Instant,
    /// Where NOTIFY_CONSUMER_IDS_CHANGED goes (the connection of its heartbeat).
    channel: Option<Responder>,
}

/// `ConsumerGroupInfo`.
#[derive(Default)]
struct ConsumerGroupInfo {
    /// Connection id -> member.
    channels: HashMap<u64, Member>,
    subscriptions: BTreeMap<String, SubscriptionData>,
    /// How the group consumes, as its last heartbeat said.
    consuming: Consuming,
}

/// `consumeType`, `messageModel` and `consumeFromWhere` of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Consuming {
    pub(crate) consume_type: String,
    pub(crate) message_model: String,
    pub(crate) consume_from_where: String,
}

impl ConsumerGroupInfo {
    /// `updateSubscription`: a topic's subscription is replaced only by a newer `subVersion`.
    /// The members of a group heartbeat in turn, each with the version of its own last
    /// rebalance; taking whichever came last would step the broker back to an older version,
    /// and the member that rebalanced last would be answered SUBSCRIPTION_NOT_LATEST on every
    /// pull until its next rebalance. True when a topic was added or removed (only that
    /// notifies the group: a new version is a member's own rebalance, not news to the others).
    fn update_subscription(&mut self, subscriptions: BTreeMap<String, SubscriptionData>) -> bool {
        let before = self.subscriptions.len();
        self.subscriptions
            .retain(|topic, _| subscriptions.contains_key(topic));
        let mut changed = self.subscriptions.len() != before;
        for (topic, sub) in subscriptions {
            match self.subscriptions.get_mut(&topic) {
                None => {
                    self.subscriptions.insert(topic, sub);
                    changed = true;
                }
                Some(old) if sub.sub_version > old.sub_version => *old = sub,
                Some(_) => {}
            }
        }
        changed
    }

    /// The members to tell of a change, with the notification (`NotifyConsumerIdsChanged`).
    fn notices(&self, group: &str) -> Vec<(Responder, RemotingCommand)> {
        let mut request = RemotingCommand::request(request_code::NOTIFY_CONSUMER_IDS_CHANGED, 0);
        request
            .ext_fields
            .insert("consumerGroup".into(), group.to_owned());
        self.channels
            .values()
            .filter_map(|m| m.channel.clone())
            .map(|c| (c, request.clone()))
            .collect()
    }
}

/// Sends the notices, outside the table's lock.
fn notify(notices: Vec<(Responder, RemotingCommand)>) {
    for (channel, request) in notices {
        channel.send_oneway_request(request);
    }
}

#[derive(Default)]
pub(crate) struct ConsumerManager {
    /// Heartbeats on the loop thread, the expiry scan on the housekeeping thread.
    groups: Mutex<HashMap<String, ConsumerGroupInfo>>,
}

impl ConsumerManager {
    /// `registerConsumer`: the heartbeat's subscriptions replace the group's (RocketMQ's
    /// `updateSubscription`); a malformed one is left out, and its reason returned. A new
    /// member or changed subscriptions notify the group's members through their `channel`s.
    pub(crate) fn register(
        &self,
        connection_id: u64,
        client_id: &str,
        data: &ConsumerData,
        now: Instant,
        channel: Option<Responder>,
    ) -> Vec<String> {
        let mut refused = Vec::new();
        let mut subscriptions = BTreeMap::new();
        for s in &data.subscription_data_set {
            match SubscriptionData::build(
                &s.topic,
                &s.sub_string,
                s.expression_type.as_deref(),
                s.sub_version,
            ) {
                Ok(sub) => {
                    subscriptions.insert(s.topic.clone(), sub);
                }
                Err(why) => refused.push(why),
            }
        }
        let notices = {
            let mut groups = lock(&self.groups);
            let info = groups.entry(data.group_name.clone()).or_default();
            let member = Member {
                client_id: client_id.to_owned(),
                last_update: now,
                channel,
            };
            let joined = info.channels.insert(connection_id, member).is_none();
            info.consuming = Consuming {
                consume_type: data.consume_type.clone(),
                message_model: data.message_model.clone(),
                consume_from_where: data.consume_from_where.clone(),
            };
            let changed = info.update_subscription(subscriptions);
            if joined || changed {
                info.notices(&data.group_name)
            } else {
                Vec::new()
            }
        };
        notify(notices);
        refused
    }

    /// `unregisterConsumer`.
    pub(crate) fn unregister(&self, group: &str, connection_id: u64) {
        self.remove_where(|g, id, _| g == group && id == connection_id);
    }

    /// `doChannelCloseEvent`.
    pub(crate) fn on_close(&self, connection_id: u64) {
        self.remove_where(|_, id, _| id == connection_id);
    }

    /// `scanNotActiveChannel`: drops consumers silent for [`CHANNEL_EXPIRED_TIMEOUT`].
    pub(crate) fn scan_not_active(&self, now: Instant) {
        self.remove_where(|_, _, m| now.duration_since(m.last_update) >= CHANNEL_EXPIRED_TIMEOUT);
    }

    /// Removes the members `gone` picks; the groups they left are notified, the empty ones
    /// forgotten.
    fn remove_where(&self, gone: impl Fn(&str, u64, &Member) -> bool) {
        let mut notices = Vec::new();
        lock(&self.groups).retain(|group, info| {
            let before = info.channels.len();
            info.channels.retain(|id, m| !gone(group, *id, m));
            if info.channels.len() != before {
                notices.extend(info.notices(group));
            }
            !info.channels.is_empty()
        });
        notify(notices);
    }

    /// The client ids of a group's live consumers, sorted; `None` when the group has none.
    pub(crate) fn client_ids(&self, group: &str) -> Option<Vec<String>> {
        let groups = lock(&self.groups);
        let info = groups.get(group)?;
        let ids: BTreeSet<String> = info
            .channels
            .values()
            .map(|m| m.client_id.clone())
            .collect();
        Some(ids.into_iter().collect())
    }

    /// `findChannel`: where a request to member `client_id` of `group` goes.
    pub(crate) fn find_channel(&self, group: &str, client_id: &str) -> Option<Responder> {
        let groups = lock(&self.groups);
        groups
            .get(group)?
            .channels
            .values()
            .find(|m| m.client_id == client_id)
            .and_then(|m| m.channel.clone())
    }

    /// A live group's subscriptions and how it consumes; `None` when no member of it is
    /// connected.
    pub(crate) fn consuming(&self, group: &str) -> Option<(Vec<SubscriptionData>, Consuming)> {
        let groups = lock(&self.groups);
        let info = groups.get(group)?;
        let subscriptions = info.subscriptions.values().cloned().collect();
        Some((subscriptions, info.consuming.clone()))
    }

    /// `queryTopicConsumeByWho`: the live groups subscribed to `topic`.
    pub(crate) fn groups_of(&self, topic: &str) -> BTreeSet<String> {
        lock(&self.groups)
            .iter()
            .filter(|(_, info)| info.subscriptions.contains_key(topic))
            .map(|(group, _)| group.clone())
            .collect()
    }

    /// The topics a live group subscribes to; `None` when no member of it is connected.
    pub(crate) fn subscribed_topics(&self, group: &str) -> Option<BTreeSet<String>> {
        let groups = lock(&self.groups);
        Some(groups.get(group)?.subscriptions.keys().cloned().collect())
    }

    /// `findSubscriptionData`; the outer `None` when the group is unknown.
    pub(crate) fn find_subscription(
        &self,
        group: &str,
        topic: &str,
    ) -> Option<Option<SubscriptionData>> {
        let groups = lock(&self.groups);
        let info = groups.get(group)?;
        Some(info.subscriptions.get(topic).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commitlog::record;
    use crate::protocol::heartbeat::SubscriptionWire;

    fn consumer(group: &str, topic: &str, sub: &str) -> ConsumerData {
        ConsumerData {
            group_name: group.into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
            subscription_data_set: vec![SubscriptionWire {
                topic: topic.into(),
                sub_string: sub.into(),
                sub_version: 1,
                expression_type: Some("TAG".into()),
            }],
            unit_mode: false,
        }
    }

    #[test]
    fn tag_expressions_match_by_hash() {
        let all = SubscriptionData::build("T", "*", None, 0).unwrap();
        assert!(all.matches(0) && all.matches(tags_hash_code("x")));
        let ab = SubscriptionData::build("T", " a || b ", Some("TAG"), 0).unwrap();
        assert!(ab.matches(tags_hash_code("a")) && ab.matches(tags_hash_code("b")));
        assert!(!ab.matches(tags_hash_code("c")) && !ab.matches(0));
        let err = SubscriptionData::build("T", "||", None, 0).unwrap_err();
        assert!(err.contains("subString split error"), "{err}");
        let err = SubscriptionData::build("T", "a", Some("CLASS"), 0).unwrap_err();
        assert!(err.contains("unknown expression type"), "{err}");
    }

    #[test]
    fn sql92_expressions_pass_the_consume_queue_and_match_by_properties() {
        let sub = SubscriptionData::build("T", " a > 5 ", Some("SQL92"), 3).unwrap();
        assert_eq!((sub.sub_string.as_str(), sub.sub_version), ("a > 5", 3));
        assert!(sub.is_filtered() && sub.matches(tags_hash_code("x")));
        let props = |v: &str| record::encode_properties([("a", v)]).unwrap();
        assert!(sub.matches_properties(&props("7")));
        assert!(!sub.matches_properties(&props("3")) && !sub.matches_properties(&[]));
        let err = SubscriptionData::build("T", "a >", Some("SQL92"), 0).unwrap_err();
        assert!(
            err.starts_with("SQL92 expression \"a >\" of topic T"),
            "{err}"
        );
    }

    fn subscriptions(entries: &[(&str, &str, i64)]) -> BTreeMap<String, SubscriptionData> {
        entries
            .iter()
            .map(|&(topic, sub, version)| {
                let data = SubscriptionData::build(topic, sub, None, version).unwrap();
                (topic.to_owned(), data)
            })
            .collect()
    }

    #[test]
    fn members_heartbeating_in_turn_never_step_the_subscription_back() {
        let mut info = ConsumerGroupInfo::default();
        assert!(info.update_subscription(subscriptions(&[("T", "a", 5)])));
        // Another member, whose last rebalance was earlier, heartbeats after it.
        assert!(!info.update_subscription(subscriptions(&[("T", "b", 3)])));
        assert_eq!(info.subscriptions["T"].sub_version, 5);
        assert_eq!(info.subscriptions["T"].sub_string, "a");
        // A newer version replaces it, without news for the group.
        assert!(!info.update_subscription(subscriptions(&[("T", "b", 7)])));
        assert_eq!(info.subscriptions["T"].sub_string, "b");
        // A topic added or dropped is news.
        assert!(info.update_subscription(subscriptions(&[("T", "b", 7), ("U", "*", 1)])));
        assert!(info.update_subscription(subscriptions(&[("U", "*", 1)])));
        assert_eq!(info.subscriptions.keys().collect::<Vec<_>>(), ["U"]);
    }

    #[test]
    fn consumers_leave_on_close_and_on_silence() {
        let m = ConsumerManager::default();
        let t0 = Instant::now();
        m.register(1, "c1", &consumer("g", "T", "a"), t0, None);
        m.register(
            2,
            "c2",
            &consumer("g", "T", "a"),
            t0 + Duration::from_secs(100),
            None,
        );
        assert_eq!(m.client_ids("g").unwrap(), vec!["c1", "c2"]);
        let sub = m.find_subscription("g", "T").unwrap().unwrap();
        assert_eq!(sub.sub_string, "a");
        assert_eq!(m.find_subscription("g", "U"), Some(None));
        m.scan_not_active(t0 + CHANNEL_EXPIRED_TIMEOUT);
        assert_eq!(m.client_ids("g").unwrap(), vec!["c2"]);
        m.on_close(2);
        assert_eq!(m.client_ids("g"), None);
        assert_eq!(m.find_subscription("g", "T"), None);
    }
}
