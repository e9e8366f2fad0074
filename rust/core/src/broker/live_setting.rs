//! The few `broker.conf` keys UPDATE_BROKER_CONFIG may change while the broker runs: each is
//! read at every use, so an operator's `mqadmin updateBrokerConfig -k brokerPermission -v 4`
//! drains a broker of new sends without a restart. Every other key is fixed at start.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// The keys that change at runtime, by RocketMQ's name.
pub(crate) const LIVE_KEYS: &[&str] = &[
    "brokerPermission",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "slaveReadEnable",
    "maxMessageSize",
];

/// A boolean key. A clone is a copy of the value, not a second view of it: two brokers built
/// from one config change independently.
#[derive(Debug, Default)]
pub struct LiveFlag(AtomicBool);

impl LiveFlag {
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, value: bool) {
        self.0.store(value, Ordering::Relaxed);
    }
}

impl From<bool> for LiveFlag {
    fn from(value: bool) -> Self {
        Self(AtomicBool::new(value))
    }
}

impl Clone for LiveFlag {
    fn clone(&self) -> Self {
        self.get().into()
    }
}

/// A numeric key, as [`LiveFlag`].
#[derive(Debug, Default)]
pub struct LiveNumber(AtomicI64);

impl LiveNumber {
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, value: i64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

impl From<i64> for LiveNumber {
    fn from(value: i64) -> Self {
        Self(AtomicI64::new(value))
    }
}

impl Clone for LiveNumber {
    fn clone(&self) -> Self {
        self.get().into()
    }
}
