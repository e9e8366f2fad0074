//! RocketMQ's `PlainAccessResource`: a request as the ACL sees it, which the validator fills in
//! from the request and the permission manager checks against its accounts. Its own module so
//! that both use it, neither through the other.

use std::collections::BTreeMap;

use super::permission::{PUB, SUB};

/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`: a group's permissions are kept under its retry topic.
pub(crate) const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

pub(crate) fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

pub(crate) fn is_retry_topic(resource: &str) -> bool {
    resource.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// A request as the ACL sees it.
#[derive(Debug, Default)]
pub(crate) struct PlainAccessResource {
    pub(crate) access_key: Option<String>,
    pub(crate) signature: Option<String>,
    /// What the signature must cover.
    pub(crate) content: Vec<u8>,
    pub(crate) request_code: i32,
    /// Topic, or group as its retry topic, to the permission the request needs on it.
    pub(crate) resources: BTreeMap<String, u8>,
}

impl PlainAccessResource {
    pub(super) fn add(&mut self, resource: Option<&String>, perm: u8) {
        if let Some(r) = resource {
            self.resources.insert(r.clone(), perm);
        }
    }

    pub(super) fn add_group(&mut self, group: Option<&String>) {
        self.add(group.map(|g| retry_topic(g)).as_ref(), SUB);
    }

    /// A send to a topic needs PUB on it; a send to a retry topic (a consumer's send-back)
    /// needs SUB on its group.
    pub(super) fn add_send(&mut self, topic: Option<&String>) {
        let perm = match topic {
            Some(t) if is_retry_topic(t) => SUB,
            _ => PUB,
        };
        self.add(topic, perm);
    }
}
