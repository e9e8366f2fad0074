//! RocketMQ's `PlainAccessValidator`: what a request needs (`parse`: its access key, signature,
//! signed content, and the topics and groups it touches with the permission each needs), and
//! the check of that against the [`PlainPermissionManager`]'s policy.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use super::acl_utils::{combine_request_content, ACCESS_KEY, SIGNATURE, UNIQUE_MSG_QUERY_FLAG};
use super::permission::SUB;
use super::plain_access_resource::PlainAccessResource;
use super::PlainPermissionManager;
use crate::protocol::heartbeat::HeartbeatData;
use crate::protocol::json::parse_lenient;
use crate::remoting::{request_code, RemotingCommand, ServerRpcHook};

/// `PlainAccessValidator.parse`, for the request codes rocketha serves. Every other code needs
/// only a valid signature (and, for the admin codes, an admin account).
pub(crate) fn parse(request: &RemotingCommand) -> Result<PlainAccessResource, String> {
    let fields = &request.ext_fields;
    let mut resource = PlainAccessResource {
        access_key: fields.get(ACCESS_KEY).cloned(),
        signature: fields.get(SIGNATURE).cloned(),
        content: combine_request_content(
            fields,
            &request.body,
            &[SIGNATURE, UNIQUE_MSG_QUERY_FLAG],
        ),
        request_code: request.code,
        resources: BTreeMap::new(),
    };
    match request.code {
        request_code::SEND_MESSAGE => resource.add_send(fields.get("topic")),
        // RocketMQ checks SEND_BATCH_MESSAGE's topic not at all; rocketha as a single send's.
        request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE => {
            resource.add_send(fields.get("b"))
        }
        request_code::PULL_MESSAGE | request_code::LITE_PULL_MESSAGE => {
            resource.add(fields.get("topic"), SUB);
            resource.add_group(fields.get("consumerGroup"));
        }
        request_code::HEART_BEAT => {
            let data: HeartbeatData =
                parse_lenient(&request.body, "HeartbeatData").map_err(|e| e.to_string())?;
            for consumer in &data.consumer_data_set {
                resource.add_group(Some(&consumer.group_name));
                for sub in &consumer.subscription_data_set {
                    resource.add(Some(&sub.topic), SUB);
                }
            }
        }
        request_code::UNREGISTER_CLIENT | request_code::GET_CONSUMER_LIST_BY_GROUP => {
            resource.add_group(fields.get("consumerGroup"))
        }
        request_code::UPDATE_CONSUMER_OFFSET => {
            resource.add_group(fields.get("consumerGroup"));
            resource.add(fields.get("topic"), SUB);
        }
        // Reading a topic's messages by key is reading the topic (RocketMQ's rule too).
        request_code::QUERY_MESSAGE => resource.add(fields.get("topic"), SUB),
        _ => {}
    }
    Ok(resource)
}

/// The broker's ACL: `aclEnable=true` with the policy of one `plain_acl.yml`.
pub(crate) struct PlainAccessValidator {
    pub(crate) manager: PlainPermissionManager,
}

impl PlainAccessValidator {
    /// `Ok` when `request` from `remote` may be processed, else the reason it may not.
    pub(crate) fn validate(&self, request: &RemotingCommand, remote: IpAddr) -> Result<(), String> {
        let resource = parse(request)?;
        self.manager.policy().validate(&resource, remote)
    }
}

impl ServerRpcHook for PlainAccessValidator {
    /// RocketMQ's ACL hook: it runs before any processor, so a refused request changes nothing.
    fn before_request(&self, request: &RemotingCommand, remote: SocketAddr) -> Result<(), String> {
        self.validate(request, remote.ip())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_by_key_needs_sub_on_its_topic() {
        let mut request = RemotingCommand::request(request_code::QUERY_MESSAGE, 0);
        request.ext_fields.insert("topic".into(), "orders".into());
        let parsed = parse(&request).unwrap();
        assert_eq!(parsed.resources.get("orders"), Some(&SUB));
    }
}
