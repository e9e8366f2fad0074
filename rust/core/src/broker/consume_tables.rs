//! The consume side's tables, shared by the processors, the controller's housekeeping and the
//! slave's sync.

use std::sync::Arc;

use super::consumer_manager::ConsumerManager;
use super::consumer_offset::ConsumerOffsetManager;
use super::consumer_order_info::ConsumerOrderInfoManager;
use super::subscription_group::SubscriptionGroupManager;

/// The subscription groups, who consumes in each, and what each group committed.
#[derive(Clone)]
pub(crate) struct ConsumeTables {
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) consumers: Arc<ConsumerManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    /// FIFO pops' progress per queue.
    pub(crate) order_info: Arc<ConsumerOrderInfoManager>,
}
