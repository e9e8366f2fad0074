//! RocketMQ's `ProducerManager`: the connections of each producer group, from their
//! heartbeats, so the transaction check-back reaches a live member of the half message's group.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::remoting::Responder;
use crate::sync::lock;

#[derive(Default)]
pub(crate) struct ProducerManager {
    /// Group -> connection id -> where a request to that member goes. A lock: heartbeats and
    /// closes on the loop thread, check-backs from the check thread.
    groups: Mutex<HashMap<String, BTreeMap<u64, Responder>>>,
}

impl ProducerManager {
    /// `registerProducer`: a heartbeat of `group` on connection `connection_id`.
    pub(crate) fn register(&self, group: &str, connection_id: u64, channel: Responder) {
        lock(&self.groups)
            .entry(group.to_owned())
            .or_default()
            .insert(connection_id, channel);
    }

    /// `unregisterProducer`: the member left the group (UNREGISTER_CLIENT).
    pub(crate) fn unregister(&self, group: &str, connection_id: u64) {
        let mut groups = lock(&self.groups);
        if let Some(members) = groups.get_mut(group) {
            members.remove(&connection_id);
            if members.is_empty() {
                groups.remove(group);
            }
        }
    }

    /// `doChannelCloseEvent`: a closed connection leaves every group.
    pub(crate) fn closed(&self, connection_id: u64) {
        lock(&self.groups).retain(|_, members| {
            members.remove(&connection_id);
            !members.is_empty()
        });
    }

    /// `getAvailableChannel`: a member of `group`, a different one for each call (`turn`), so
    /// check-backs spread over the group as RocketMQ's random pick spreads them.
    pub(crate) fn available_channel(&self, group: &str, turn: usize) -> Option<Responder> {
        let groups = lock(&self.groups);
        let members = groups.get(group)?;
        members.values().nth(turn % members.len()).cloned()
    }
}
