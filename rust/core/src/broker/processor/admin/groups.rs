//! Subscription groups as an operator manages them (`mqadmin updateSubGroup`, `deleteSubGroup`,
//! `examineSubscriptionGroupConfig`): UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
//! DELETE_SUBSCRIPTIONGROUP and GET_SUBSCRIPTIONGROUP_CONFIG.

use crate::broker::consumer_manager::ConsumerManager;
use crate::broker::consumer_offset::ConsumerOffsetManager;
use crate::broker::processor::answer::system_error;
use crate::broker::subscription_group::{SubscriptionGroupConfig, SubscriptionGroupManager};
use crate::protocol::json::parse_lenient;
use crate::remoting::header::{
    DeleteSubscriptionGroupRequestHeader, GetSubscriptionGroupConfigRequestHeader,
};
use crate::remoting::{response_code, RemotingCommand};

/// `TopicValidator.GROUP_MAX_LENGTH`.
const GROUP_MAX_LENGTH: usize = 255;

/// `TopicValidator.validateGroup`, with its remarks.
pub(crate) fn validate_group(group: &str) -> Result<(), String> {
    if group.trim().is_empty() {
        return Err("The specified group is blank.".into());
    }
    if !group
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"%|-_".contains(&b))
    {
        return Err(format!(
            "The specified group: {group}, contains illegal characters, allowing only \
             ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    if group.len() > GROUP_MAX_LENGTH {
        return Err(format!(
            "The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
        ));
    }
    Ok(())
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body's `SubscriptionGroupConfig` replaces the
/// group's, or creates it.
pub(crate) fn update_and_create(
    groups: &SubscriptionGroupManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let refuse = |code, remark: String| RemotingCommand::response_to(request, code, Some(remark));
    let config: SubscriptionGroupConfig =
        match parse_lenient(&request.body, "SubscriptionGroupConfig") {
            Ok(c) => c,
            Err(e) => return refuse(response_code::SYSTEM_ERROR, e.to_string()),
        };
    if let Err(why) = validate_group(&config.group_name) {
        return refuse(response_code::INVALID_PARAMETER, why);
    }
    if config.retry_queue_nums < 0 || config.retry_max_times < -1 {
        return refuse(
            response_code::INVALID_PARAMETER,
            format!(
                "group {}: retryQueueNums {} must be at least 0 and retryMaxTimes {} at least -1",
                config.group_name, config.retry_queue_nums, config.retry_max_times
            ),
        );
    }
    match groups.update_or_create(config) {
        Ok(()) => RemotingCommand::response_to(request, response_code::SUCCESS, None),
        Err(e) => refuse(response_code::SYSTEM_ERROR, e.to_string()),
    }
}

/// DELETE_SUBSCRIPTIONGROUP: the group goes (a consumer's next heartbeat creates it again
/// while `autoCreateSubscriptionGroup` is on), with its offsets when `cleanOffset` asks.
pub(crate) fn delete(
    groups: &SubscriptionGroupManager,
    offsets: &ConsumerOffsetManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header: DeleteSubscriptionGroupRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    if let Err(e) = groups.delete(&header.group_name) {
        return system_error(request, e);
    }
    if header.clean_offset {
        offsets.remove_where(|_, group| group == header.group_name);
    }
    RemotingCommand::response_to(request, response_code::SUCCESS, None)
}

/// QUERY_TOPIC_CONSUME_BY_WHO (the consumption track of `mqadmin queryMsgById`): the groups
/// subscribed to the topic now or that committed an offset in it, as a `GroupList`.
pub(crate) fn consumed_by(
    consumers: &ConsumerManager,
    offsets: &ConsumerOffsetManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let Some(topic) = request.ext_fields.get("topic") else {
        return system_error(request, "QUERY_TOPIC_CONSUME_BY_WHO: `topic` is missing");
    };
    let mut groups = consumers.groups_of(topic);
    groups.extend(offsets.groups_of(topic));
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.body = serde_json::json!({ "groupList": groups })
        .to_string()
        .into_bytes();
    response
}

/// GET_SUBSCRIPTIONGROUP_CONFIG: one group's config, as JSON.
pub(crate) fn get(groups: &SubscriptionGroupManager, request: &RemotingCommand) -> RemotingCommand {
    let header: GetSubscriptionGroupConfigRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    match groups.get(&header.group) {
        Some(config) => {
            let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
            response.body = serde_json::to_vec(&config).unwrap_or_default();
            response
        }
        None => RemotingCommand::response_to(
            request,
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            Some(format!("No group {} in this broker", header.group)),
        ),
    }
}
