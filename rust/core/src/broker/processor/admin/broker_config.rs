//! GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG (`mqadmin getBrokerConfig`, `updateBrokerConfig`):
//! the running `broker.conf` as a properties text, and a runtime change of the keys that take
//! effect without a restart ([`LIVE_KEYS`]). RocketMQ accepts any key and leaves most of them
//! to act at the next start, or never; rocketha refuses those with NO_PERMISSION, naming the
//! key, so an operator is never told a change happened that did not.

use std::sync::Mutex;

use crate::broker::config::{parse_properties, BrokerConfig, IGNORED_KEYS};
use crate::broker::live_setting::LIVE_KEYS;
use crate::broker::BrokerSettings;
use crate::remoting::{response_code, RemotingCommand};
use crate::sync::lock;

/// GET_BROKER_CONFIG: every key as the broker runs it, secrets left out.
pub(crate) fn get_broker_config(
    config: &Mutex<BrokerConfig>,
    request: &RemotingCommand,
) -> RemotingCommand {
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.body = lock(config).to_properties().into_bytes();
    response
}

/// What an update did: the answer, and whether `brokerPermission` changed (the name servers
/// must then hear of it at once).
pub(crate) struct Updated {
    pub(crate) response: RemotingCommand,
    pub(crate) permission_changed: bool,
}

/// UPDATE_BROKER_CONFIG: all of the body's keys are checked before any is applied, so a
/// refused update changes nothing.
pub(crate) fn update_broker_config(
    config: &Mutex<BrokerConfig>,
    settings: &BrokerSettings,
    request: &RemotingCommand,
) -> Updated {
    let refuse = |code, remark: String| Updated {
        response: RemotingCommand::response_to(request, code, Some(remark)),
        permission_changed: false,
    };
    let text = String::from_utf8_lossy(&request.body);
    let pairs = match parse_properties(&text) {
        Ok(pairs) if !pairs.is_empty() => pairs,
        Ok(_) => return refuse(response_code::SYSTEM_ERROR, "no key in the body".into()),
        Err(e) => {
            return refuse(
                response_code::SYSTEM_ERROR,
                format!("string2Properties error: {e}"),
            )
        }
    };
    let mut config = lock(config);
    let mut updated = config.clone();
    for (_, key, value) in &pairs {
        if let Err(e) = check_key(&mut updated, key, value) {
            return refuse(e.0, e.1);
        }
    }
    if let Err(e) = updated.validate() {
        return refuse(response_code::SYSTEM_ERROR, e.to_string());
    }
    let permission_changed = updated.broker_permission != config.broker_permission;
    let live = updated.settings();
    settings.broker_permission.set(live.broker_permission.get());
    settings.auto_create_topic.set(live.auto_create_topic.get());
    settings
        .auto_create_subscription_group
        .set(live.auto_create_subscription_group.get());
    settings.slave_read_enable.set(live.slave_read_enable.get());
    settings.max_message_size.set(live.max_message_size.get());
    *config = updated;
    Updated {
        response: RemotingCommand::response_to(request, response_code::SUCCESS, None),
        permission_changed,
    }
}

/// Sets one key on `config`, or the code and remark it is refused with.
fn check_key(config: &mut BrokerConfig, key: &str, value: &str) -> Result<(), (i32, String)> {
    if LIVE_KEYS.contains(&key) {
        return config
            .set(key, value)
            .map_err(|e| (response_code::SYSTEM_ERROR, e.to_string()));
    }
    let why = if IGNORED_KEYS.contains(&key) {
        "rocketha reads it but does not act on it"
    } else if BrokerConfig::KEYS.contains(&key) {
        "it is read once, at start: set it in broker.conf and restart the broker"
    } else {
        // Unknown: the error names the closest key.
        let unknown = config.set(key, value).err().map(|e| e.to_string());
        return Err((response_code::SYSTEM_ERROR, unknown.unwrap_or_default()));
    };
    Err((
        response_code::NO_PERMISSION,
        format!(
            "{key} may not change while the broker runs: {why}; the keys that do are {}",
            LIVE_KEYS.join(", ")
        ),
    ))
}
