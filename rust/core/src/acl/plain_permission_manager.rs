//! RocketMQ's `PlainPermissionManager`: the accounts and global white addresses of a
//! `plain_acl.yml`, and the check of a request against them.
//!
//! The file is read at start (a file that does not load stops the broker) and whenever its
//! content changes ([`PlainPermissionManager::reload_if_changed`], called by the broker's
//! housekeeping every 500 ms). A changed file that does not load leaves the policy in force and
//! says why, so a half-written edit never opens the broker or locks everyone out.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_yaml::Value;

use super::acl_utils::{cal_signature, signatures_equal};
use super::permission::{self, check_permission, need_admin_perm, parse_perm, DENY, PUB};
use super::plain_access_resource::{is_retry_topic, retry_topic, PlainAccessResource};
use super::remote_address::RemoteAddressStrategy;
use crate::sync::lock;

/// `AclConstants.ACCESS_KEY_MIN_LENGTH` and `SECRET_KEY_MIN_LENGTH`: keys must be longer.
const KEY_MIN_LENGTH: usize = 6;
/// `TopicValidator.RMQ_SYS_TRACE_TOPIC`: message traces are sent by every client, so sending
/// them needs no topic permission.
const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct AclError {
    pub path: PathBuf,
    pub reason: String,
}

/// One entry of `accounts` (`PlainAccessResource` as configured).
#[derive(Debug)]
struct Account {
    secret_key: String,
    white_remote_address: RemoteAddressStrategy,
    admin: bool,
    default_topic_perm: u8,
    default_group_perm: u8,
    /// Topics by name, groups as their retry topic (`%RETRY%group`), as RocketMQ keys them.
    perms: HashMap<String, u8>,
}

/// A loaded `plain_acl.yml`.
#[derive(Debug, Default)]
pub(crate) struct Policy {
    global_white_remote_addresses: Vec<RemoteAddressStrategy>,
    accounts: HashMap<String, Account>,
}

impl Policy {
    /// `PlainPermissionManager.validate`: a global white address passes; otherwise the access
    /// key must name an account, whose white address passes, or whose secret key verifies the
    /// signature; then every resource the request needs is checked against its permissions.
    pub(crate) fn validate(
        &self,
        request: &PlainAccessResource,
        remote: IpAddr,
    ) -> Result<(), String> {
        if self
            .global_white_remote_addresses
            .iter()
            .any(|s| s.matches(remote))
        {
            return Ok(());
        }
        let access_key = request
            .access_key
            .as_deref()
            .ok_or("No accessKey is configured")?;
        let account = self
            .accounts
            .get(access_key)
            .ok_or_else(|| format!("No acl config for {access_key}"))?;
        if account.white_remote_address.matches(remote) {
            return Ok(());
        }
        let expected = cal_signature(&request.content, &account.secret_key);
        if !signatures_equal(&expected, request.signature.as_deref().unwrap_or_default()) {
            return Err(format!("Check signature failed for accessKey={access_key}"));
        }
        if request.resources.get(RMQ_SYS_TRACE_TOPIC) == Some(&PUB) {
            return Ok(());
        }
        account.check_perm(access_key, request)
    }

    fn parse(text: &str) -> Result<Self, String> {
        let doc: Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        let mut policy = Policy::default();
        let top = match doc {
            Value::Mapping(m) => m,
            // An empty file: no accounts, nobody passes.
            Value::Null => return Ok(policy),
            _ => {
                return Err(
                    "expected a mapping with accounts and globalWhiteRemoteAddresses".into(),
                )
            }
        };
        for (key, value) in top {
            match key.as_str().unwrap_or_default() {
                "globalWhiteRemoteAddresses" => {
                    for pattern in strings(&value, "globalWhiteRemoteAddresses")? {
                        policy
                            .global_white_remote_addresses
                            .push(RemoteAddressStrategy::parse(&pattern)?);
                    }
                }
                "accounts" => {
                    let Value::Sequence(accounts) = value else {
                        return Err("accounts: expected a list".into());
                    };
                    for (i, a) in accounts.iter().enumerate() {
                        let (key, account) =
                            Account::parse(a).map_err(|e| format!("accounts[{i}]: {e}"))?;
                        if policy.accounts.insert(key.clone(), account).is_some() {
                            return Err(format!("accounts[{i}]: accessKey {key} is listed twice"));
                        }
                    }
                }
                // Written by RocketMQ's admin tools when they update the file.
                "dataVersion" => {}
                other => {
                    return Err(format!(
                        "unknown key {other:?} (expected accounts, globalWhiteRemoteAddresses)"
                    ))
                }
            }
        }
        Ok(policy)
    }
}

impl Account {
    /// `PlainPermissionManager.checkPerm`.
    fn check_perm(&self, access_key: &str, request: &PlainAccessResource) -> Result<(), String> {
        if need_admin_perm(request.request_code) && !self.admin {
            return Err(format!(
                "Need admin permission for request code={}, but accessKey={access_key} is not",
                request.request_code
            ));
        }
        // An admin without listed permissions may access everything.
        if self.admin && self.perms.is_empty() {
            return Ok(());
        }
        for (resource, &needed) in &request.resources {
            let group = is_retry_topic(resource);
            let owned = self.perms.get(resource).copied().unwrap_or(if group {
                self.default_group_perm
            } else {
                self.default_topic_perm
            });
            if !check_permission(needed, owned) {
                let (kind, name) = match resource
                    .strip_prefix(super::plain_access_resource::RETRY_GROUP_TOPIC_PREFIX)
                {
                    Some(g) if group => ("group", g),
                    _ => ("topic", resource.as_str()),
                };
                let what = if needed & permission::PUB != 0 {
                    "PUB"
                } else {
                    "SUB"
                };
                return Err(format!(
                    "No {what} permission for {kind} {name} (accessKey={access_key})"
                ));
            }
        }
        Ok(())
    }

    fn parse(value: &Value) -> Result<(String, Account), String> {
        let Value::Mapping(map) = value else {
            return Err("expected a mapping".into());
        };
        let mut fields: BTreeMap<String, &Value> = BTreeMap::new();
        for (k, v) in map {
            let key = k.as_str().unwrap_or_default();
            match key {
                "accessKey" | "secretKey" | "whiteRemoteAddress" | "admin" | "defaultTopicPerm"
                | "defaultGroupPerm" | "topicPerms" | "groupPerms" => {
                    fields.insert(key.to_owned(), v);
                }
                other => return Err(format!("unknown key {other:?}")),
            }
        }
        let text = |key: &str| fields.get(key).and_then(|v| scalar(v));
        let key = |name: &str| {
            text(name)
                .filter(|k| k.len() > KEY_MIN_LENGTH)
                .ok_or_else(|| {
                    format!("{name} must be set and longer than {KEY_MIN_LENGTH} characters")
                })
        };
        let access_key = key("accessKey")?;
        let perm = |name: &str| match text(name) {
            Some(s) => parse_perm(&s).map_err(|e| format!("{name}: {e}")),
            // RocketMQ's default when unset.
            None => Ok(DENY),
        };
        let admin = match fields.get("admin") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("admin: expected true or false".into()),
        };
        let mut perms = HashMap::new();
        for (list, group) in [("topicPerms", false), ("groupPerms", true)] {
            let Some(v) = fields.get(list) else { continue };
            for entry in strings(v, list)? {
                let (name, p) = entry
                    .split_once('=')
                    .filter(|(n, _)| !n.trim().is_empty())
                    .ok_or_else(|| {
                        format!("{list}: {entry:?} is not Name=PERM (e.g. topicA=PUB|SUB)")
                    })?;
                let p = parse_perm(p).map_err(|e| format!("{list}: {entry:?}: {e}"))?;
                let name = name.trim();
                let resource = if group {
                    retry_topic(name)
                } else {
                    name.to_owned()
                };
                perms.insert(resource, p);
            }
        }
        let account = Account {
            secret_key: key("secretKey")?,
            white_remote_address: RemoteAddressStrategy::parse(
                &text("whiteRemoteAddress").unwrap_or_default(),
            )?,
            admin,
            default_topic_perm: perm("defaultTopicPerm")?,
            default_group_perm: perm("defaultGroupPerm")?,
            perms,
        };
        Ok((access_key, account))
    }
}

/// A YAML scalar as the Java loader sees it: `secretKey: 12345678` is the string "12345678".
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A list of scalars; an absent (null) list is empty.
fn strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Sequence(items) => items
            .iter()
            .map(|i| scalar(i).ok_or_else(|| format!("{what}: {i:?} is not a string")))
            .collect(),
        _ => Err(format!("{what}: expected a list")),
    }
}

struct State {
    policy: Arc<Policy>,
    /// The file's bytes at the last look (None: it could not be read), so any edit is seen,
    /// whatever the file system's timestamp granularity (RocketMQ's `FileWatchService` compares
    /// digests for the same reason). The file is small; reading it twice a second is cheap.
    content: Option<Vec<u8>>,
}

pub(crate) struct PlainPermissionManager {
    path: PathBuf,
    /// A lock: requests read the policy on the loop thread, housekeeping swaps it.
    state: Mutex<State>,
}

impl PlainPermissionManager {
    /// Reads `path`; an unreadable or invalid file is an error naming it and the reason.
    pub(crate) fn load(path: &Path) -> Result<Self, AclError> {
        let err = |reason: String| AclError {
            path: path.to_owned(),
            reason,
        };
        let content = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        let policy = parse(&content).map_err(err)?;
        Ok(Self {
            path: path.to_owned(),
            state: Mutex::new(State {
                policy: Arc::new(policy),
                content: Some(content),
            }),
        })
    }

    pub(crate) fn policy(&self) -> Arc<Policy> {
        lock(&self.state).policy.clone()
    }

    /// Re-reads the file and, when its content changed since the last look, loads it:
    /// `Some(Ok(summary))` when a new policy is in force, `Some(Err(reason))` when the changed
    /// file did not load (the previous policy stays), `None` when nothing changed. A failure is
    /// reported once per change, not at every look.
    pub(crate) fn reload_if_changed(&self) -> Option<Result<String, String>> {
        let now = std::fs::read(&self.path).ok();
        let mut state = lock(&self.state);
        if now == state.content {
            return None;
        }
        let result = match now.as_deref().map(parse) {
            None => Err("cannot be read; the policy loaded before stays in force".to_owned()),
            Some(Ok(policy)) => {
                let summary = format!("reloaded, {} accounts", policy.accounts.len());
                state.policy = Arc::new(policy);
                Ok(summary)
            }
            Some(Err(e)) => Err(format!("{e}; the policy loaded before stays in force")),
        };
        state.content = now;
        let path = self.path.display();
        Some(
            result
                .map(|s| format!("{path}: {s}"))
                .map_err(|e| format!("{path}: {e}")),
        )
    }
}

fn parse(content: &[u8]) -> Result<Policy, String> {
    let text = std::str::from_utf8(content).map_err(|e| format!("not UTF-8: {e}"))?;
    Policy::parse(text)
}

#[cfg(test)]
mod tests;
