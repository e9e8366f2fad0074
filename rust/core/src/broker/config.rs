//! RocketMQ's `BrokerConfig` and `MessageStoreConfig` as one `broker.conf`: every key rocketha
//! knows, by RocketMQ's camelCase name, with its default, parsed from properties with errors
//! naming the key and the value. The store's, HA's and retention's own settings
//! ([`StoreConfig`], [`HaConfig`], [`CleanConfig`]) and the broker's ([`BrokerSettings`],
//! [`BrokerControllerConfig`]) are derived from it, so each default is written once: the store's
//! and HA's keys default to what those modules define, every other key's default is here.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::{BrokerControllerConfig, BrokerSettings, TransferLimit};
use crate::commitlog::flush::FlushDiskType;
use crate::ha::HaConfig;
use crate::remoting::ServerConfig;
use crate::store::{CleanConfig, StoreConfig};

/// `brokerRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerRole {
    AsyncMaster,
    SyncMaster,
    Slave,
}

impl BrokerRole {
    pub fn name(self) -> &'static str {
        match self {
            Self::AsyncMaster => "ASYNC_MASTER",
            Self::SyncMaster => "SYNC_MASTER",
            Self::Slave => "SLAVE",
        }
    }

    pub fn is_master(self) -> bool {
        self != Self::Slave
    }
}

/// A key that is not known, or a value that does not fit its key or the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown key '{key}'{}", suggestion.as_ref().map(|s| format!("; did you mean '{s}'?")).unwrap_or_default())]
    UnknownKey {
        key: String,
        suggestion: Option<String>,
    },
    /// `key` is RocketMQ's name (or `retention`, for the retention keys checked together).
    #[error("{key}: {problem}")]
    Invalid { key: &'static str, problem: String },
}

impl ConfigError {
    /// The key the error is about, as RocketMQ names it.
    pub fn key(&self) -> &str {
        match self {
            Self::UnknownKey { key, .. } => key,
            Self::Invalid { key, .. } => key,
        }
    }
}

#[cold]
fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        problem: problem.into(),
    }
}

/// A key's value as its type has it (enums by RocketMQ's name), for bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Unset,
}

/// One key's type: how its text is read and written back.
pub trait ConfigValue: Sized {
    fn value(&self) -> Value;
    /// What a bad value was expected to be, for the error.
    const EXPECTED: &'static str;
    fn parse(text: &str) -> Option<Self>;
    /// `None`: the key is unset and not written.
    fn render(&self) -> Option<String>;
}

impl ConfigValue for String {
    fn value(&self) -> Value {
        Value::Str(self.clone())
    }

    const EXPECTED: &'static str = "str";
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn render(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl ConfigValue for i64 {
    fn value(&self) -> Value {
        Value::Int(*self)
    }

    const EXPECTED: &'static str = "int";
    fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn render(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl ConfigValue for bool {
    fn value(&self) -> Value {
        Value::Bool(*self)
    }

    const EXPECTED: &'static str = "bool";
    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
    fn render(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// Optional keys: an empty value unsets them.
impl<T: ConfigValue> ConfigValue for Option<T> {
    fn value(&self) -> Value {
        self.as_ref().map_or(Value::Unset, T::value)
    }

    const EXPECTED: &'static str = T::EXPECTED;
    fn parse(text: &str) -> Option<Self> {
        if text.is_empty() {
            return Some(None);
        }
        T::parse(text).map(Some)
    }
    fn render(&self) -> Option<String> {
        self.as_ref().and_then(T::render)
    }
}

impl ConfigValue for BrokerRole {
    fn value(&self) -> Value {
        Value::Str(self.name().to_owned())
    }

    const EXPECTED: &'static str = "BrokerRole (one of ASYNC_MASTER, SYNC_MASTER, SLAVE)";
    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_uppercase().as_str() {
            "ASYNC_MASTER" => Some(Self::AsyncMaster),
            "SYNC_MASTER" => Some(Self::SyncMaster),
            "SLAVE" => Some(Self::Slave),
            _ => None,
        }
    }
    fn render(&self) -> Option<String> {
        Some(self.name().to_owned())
    }
}

impl ConfigValue for FlushDiskType {
    fn value(&self) -> Value {
        self.render().map_or(Value::Unset, Value::Str)
    }

    const EXPECTED: &'static str = "FlushDiskType (one of ASYNC_FLUSH, SYNC_FLUSH)";
    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_uppercase().as_str() {
            "ASYNC_FLUSH" => Some(Self::AsyncFlush),
            "SYNC_FLUSH" => Some(Self::SyncFlush),
            _ => None,
        }
    }
    fn render(&self) -> Option<String> {
        Some(
            match self {
                Self::AsyncFlush => "ASYNC_FLUSH",
                Self::SyncFlush => "SYNC_FLUSH",
            }
            .to_owned(),
        )
    }
}

/// Declares the struct, its defaults, the key table, the typed setter and the writer from one
/// list, so a key cannot be added to one and missed in another.
macro_rules! broker_config {
    (defaults($s:ident, $h:ident); $( $(#[doc = $doc:literal])* $field:ident: $ty:ty = $key:literal, $default:expr; )*) => {
        /// One broker's `broker.conf`; fields are RocketMQ's keys in snake_case.
        #[derive(Debug, Clone, PartialEq)]
        pub struct BrokerConfig {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                // The store's and HA's keys default to what those modules define.
                let $s = StoreConfig::new(default_store_path_root_dir());
                let $h = HaConfig::default();
                Self { $( $field: $default, )* }
            }
        }

        impl BrokerConfig {
            /// Every key, by RocketMQ's name, in the order of the fields.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// The snake_case field of each key, in the same order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Sets `key` from its text (trimmed first); `Ok(false)` for a key not listed.
            fn set_known(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
                let value = value.trim();
                match key {
                    $( $key => {
                        self.$field = <$ty as ConfigValue>::parse(value).ok_or_else(|| {
                            invalid($key, format!(
                                "bad value '{value}', expected {}",
                                <$ty as ConfigValue>::EXPECTED
                            ))
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            /// `(field, value)` of every key, typed; secrets included.
            pub fn values(&self) -> Vec<(&'static str, Value)> {
                vec![$( (stringify!($field), ConfigValue::value(&self.$field)), )*]
            }

            /// `(key, value)` of every key, `None` when unset; secrets included.
            pub fn entries(&self) -> Vec<(&'static str, Option<String>)> {
                vec![$( ($key, ConfigValue::render(&self.$field)), )*]
            }
        }
    };
}

const MIB: i64 = 1024 * 1024;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// RocketMQ's `storePathRootDir`: `~/store`.
fn default_store_path_root_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join("store")
}

broker_config! {
    defaults(s, h);
    broker_cluster_name: String = "brokerClusterName", "DefaultCluster".into();
    broker_name: String = "brokerName", "broker-a".into();
    /// 0 is the master.
    broker_id: i64 = "brokerId", 0;
    broker_role: BrokerRole = "brokerRole", BrokerRole::AsyncMaster;
    flush_disk_type: FlushDiskType = "flushDiskType", s.flush_disk_type;
    store_path_root_dir: String = "storePathRootDir", s.root.to_string_lossy().into_owned();
    mapped_file_size_commit_log: i64 = "mappedFileSizeCommitLog", int(s.mapped_file_size);
    mapped_file_size_consume_queue: i64 = "mappedFileSizeConsumeQueue",
        int(s.mapped_file_size_consume_queue());
    /// With `listenPort` the store host recorded in every message (and in msg ids).
    broker_ip1: String = "brokerIP1", "127.0.0.1".into();
    /// The client port; 0 = OS-chosen.
    listen_port: i64 = "listenPort", 10911;
    /// rocketha: the interface the client port binds (RocketMQ binds all of them).
    listen_address: String = "listenAddress", "127.0.0.1".into();
    /// rocketha: allow a client port on a non-loopback address without `aclEnable`.
    remoting_allow_insecure: bool = "remotingAllowInsecure", false;
    /// `disabled`, `permissive` (TLS and plain) or `enforcing`.
    tls_server_mode: String = "tls.server.mode", "disabled".into();
    tls_server_cert_path: Option<String> = "tls.server.certPath", None;
    tls_server_key_path: Option<String> = "tls.server.keyPath", None;
    /// Not supported (encrypted keys): set, the broker refuses to start.
    tls_server_key_password: Option<String> = "tls.server.keyPassword", None;
    /// `none`, `optional` or `require`, checked against `tls.server.trustCertPath`.
    tls_server_need_client_auth: String = "tls.server.need.client.auth", "none".into();
    tls_server_trust_cert_path: Option<String> = "tls.server.trustCertPath", None;
    /// TLS on the broker's own connections: to name servers, and a slave's to its master.
    tls_enable: bool = "tls.enable", false;
    /// Trust any server certificate (RocketMQ's default is true; rocketha verifies).
    tls_test_mode_enable: bool = "tls.test.mode.enable", false;
    tls_client_trust_cert_path: Option<String> = "tls.client.trustCertPath", None;
    tls_client_cert_path: Option<String> = "tls.client.certPath", None;
    tls_client_key_path: Option<String> = "tls.client.keyPath", None;
    /// Not supported (encrypted keys): set, the broker refuses to start.
    tls_client_key_password: Option<String> = "tls.client.keyPassword", None;
    /// Check every client request against `plain_acl.yml` (RocketMQ's ACL 1.0).
    acl_enable: bool = "aclEnable", false;
    /// rocketha: the ACL file; by default `$ROCKETMQ_HOME/conf/plain_acl.yml`.
    acl_plain_file: Option<String> = "aclPlainFile", None;
    /// Name servers to register with, `host:port` separated by `;`.
    namesrv_addr: Option<String> = "namesrvAddr", None;
    /// Milliseconds between registrations with the name servers.
    register_name_server_period: i64 = "registerNameServerPeriod", 30_000;
    /// Sends to an unknown topic create it from `TBW102` (RocketMQ 4.x's default: true).
    auto_create_topic_enable: bool = "autoCreateTopicEnable", true;
    /// Queues of the `TBW102` template, so at most this many per auto-created topic.
    default_topic_queue_nums: i64 = "defaultTopicQueueNums", 8;
    /// 6 = read and write; 4 = read only; 2 = write only.
    broker_permission: i64 = "brokerPermission", int(
        crate::protocol::body::perm::PERM_READ | crate::protocol::body::perm::PERM_WRITE
    );
    ha_listen_port: i64 = "haListenPort", 10912;
    /// rocketha: the interface the HA port binds; loopback, as `listenAddress`.
    ha_listen_address: String = "haListenAddress", "127.0.0.1".into();
    ha_master_address: Option<String> = "haMasterAddress", None;
    ha_send_heartbeat_interval: i64 = "haSendHeartbeatInterval", ms(h.heartbeat_interval);
    ha_housekeeping_interval: i64 = "haHousekeepingInterval", ms(h.housekeeping_interval);
    ha_transfer_batch_size: i64 = "haTransferBatchSize", int(h.transfer_batch_size);
    slave_timeout: i64 = "slaveTimeout", ms(s.slave_timeout);
    sync_flush_timeout: i64 = "syncFlushTimeout", ms(s.sync_flush_timeout);
    /// Replicas, the master included, that must hold a put; unset, 2 for SYNC_MASTER, else 1.
    in_sync_replicas: Option<i64> = "inSyncReplicas", None;
    ha_max_gap_not_in_sync: i64 = "haMaxGapNotInSync", int(s.ha_max_gap_not_in_sync);
    ha_flow_control_enable: bool = "haFlowControlEnable", false;
    max_ha_transfer_byte_in_second: i64 = "maxHaTransferByteInSecond", 100 * MIB;
    sync_from_last_file: bool = "syncFromLastFile", h.sync_from_last_file;
    /// Consumers that lag are sent to a slave, and a slave serves pulls.
    slave_read_enable: bool = "slaveReadEnable", false;
    /// Percent of RAM a consumer may lag behind the head before it counts as reading from disk.
    access_message_in_memory_max_ratio: i64 = "accessMessageInMemoryMaxRatio", 40;
    /// The broker id the subscription groups this broker creates send lagging consumers to.
    which_broker_when_consume_slowly: i64 = "whichBrokerWhenConsumeSlowly", 1;
    /// A suspended pull is held for its `suspendTimeoutMillis` (else 1 s).
    long_polling_enable: bool = "longPollingEnable", true;
    /// Milliseconds between writes of `config/consumerOffset.json`.
    flush_consumer_offset_interval: i64 = "flushConsumerOffsetInterval", 5000;
    /// Consumer groups are created on first use; off, an unknown group is refused.
    auto_create_subscription_group: bool = "autoCreateSubscriptionGroup", true;
    /// The most one pull answers with while its records are in memory: bytes, and messages.
    max_transfer_bytes_on_message_in_memory: i64 = "maxTransferBytesOnMessageInMemory", 256 * 1024;
    max_transfer_count_on_message_in_memory: i64 = "maxTransferCountOnMessageInMemory", 32;
    /// The same for a consumer so far behind that its records are read from disk.
    max_transfer_bytes_on_message_in_disk: i64 = "maxTransferBytesOnMessageInDisk", 64 * 1024;
    max_transfer_count_on_message_in_disk: i64 = "maxTransferCountOnMessageInDisk", 8;
    /// rocketha, slave: milliseconds between fetches of the master's tables (RocketMQ: 60 s).
    slave_sync_interval: i64 = "slaveSyncInterval", 60_000;
    flush_interval_commit_log: i64 = "flushIntervalCommitLog", ms(s.flush_interval);
    max_message_size: i64 = "maxMessageSize", 4 * MIB;
    /// rocketha: shared secret for the HA handshake; or read from a file or an env variable.
    ha_auth_secret: Option<String> = "haAuthSecret", None;
    ha_auth_secret_file: Option<String> = "haAuthSecretFile", None;
    ha_auth_secret_env: Option<String> = "haAuthSecretEnv", None;
    /// rocketha, slave: ask the master for a CRC32 on every frame (needs haAuthSecret).
    ha_transfer_crc: bool = "haTransferCrc", h.frame_crc;
    /// rocketha: take records whose BODYCRC is 0 (peers that never fill it in).
    ha_accept_zero_body_crc: bool = "haAcceptZeroBodyCrc", s.accept_zero_body_crc;
    /// rocketha: allow an HA port on a non-loopback address without a secret.
    ha_allow_insecure: bool = "haAllowInsecure", false;
    /// rocketha: serve `/metrics` and `/status` on this port (0 = OS-chosen; unset = off).
    metrics_port: Option<i64> = "metricsPort", None;
    /// rocketha: the interface the metrics port binds.
    metrics_address: String = "metricsAddress", "127.0.0.1".into();
    /// Local hours (`04`, or `04;10`) at which expired commit log segments are deleted.
    delete_when: String = "deleteWhen", render_delete_when(&s.clean.delete_when);
    /// Hours a commit log segment is kept after its last write.
    file_reserved_time: i64 = "fileReservedTime", int(s.clean.file_reserved_time);
    disk_max_used_space_ratio: i64 = "diskMaxUsedSpaceRatio",
        i64::from(s.clean.disk_max_used_space_ratio);
    disk_space_clean_forcibly_ratio: i64 = "diskSpaceCleanForciblyRatio",
        i64::from(s.clean.disk_space_clean_forcibly_ratio);
    disk_space_warning_level_ratio: i64 = "diskSpaceWarningLevelRatio",
        i64::from(s.clean.disk_space_warning_level_ratio);
    clean_resource_interval: i64 = "cleanResourceInterval", ms(s.clean.clean_resource_interval);
    delete_file_batch_max: i64 = "deleteFileBatchMax", int(s.clean.delete_file_batch_max);
    /// rocketha, for tests only: milliseconds in one `fileReservedTime` hour.
    file_reserved_time_unit_ms: i64 = "fileReservedTimeUnitMs", ms(s.clean.hour);
    /// The commit log's directory; by default `storePathRootDir/commitlog`.
    store_path_commit_log: Option<String> = "storePathCommitLog", None;
}

/// `deleteWhen` as written: two-digit hours separated by `;`.
fn render_delete_when(hours: &[u32]) -> String {
    hours
        .iter()
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// RocketMQ broker and store keys that load but that rocketha does not act on.
pub const IGNORED_KEYS: &[&str] = &[
    "brokerIP2",
    "enablePropertyFilter",
    "storePathConsumeQueue",
    "storePathIndex",
    "storeCheckpoint",
    "abortFile",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "flushCommitLogLeastPages",
    "flushConsumeQueueLeastPages",
    "flushCommitLogThoroughInterval",
    "flushConsumeQueueThoroughInterval",
    "flushIntervalConsumeQueue",
    "transientStorePoolEnable",
    "transientStorePoolSize",
    "mapedFileSizeConsumeQueue",
    "messageDelayLevel",
    "traceTopicEnable",
    "useEpollNativeSelector",
    "warmMapedFileEnable",
    "warmMappedFileEnable",
    "destroyMapedFileIntervalForcibly",
    "redeleteHangedFileInterval",
    "checkCRCOnRecover",
    "messageIndexEnable",
    "maxHashSlotNum",
    "maxIndexNum",
    "duplicationEnable",
    "enableDLegerCommitLog",
    "enableControllerMode",
    "fetchNamesrvAddrByAddressServer",
    "rejectTransactionMessage",
    "serverWorkerThreads",
    "serverSelectorThreads",
    "clientWorkerThreads",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "highSpeedMode",
    "commercialEnable",
    "osPageCacheBusyTimeOutMills",
    "defaultQueryMaxNum",
    "transferMsgByHeap",
    "maxDelayTime",
    "timerWheelEnable",
    "enableScheduleMessageStats",
    // rocketha checks client certificates against tls.server.trustCertPath whenever
    // tls.server.need.client.auth asks for one, and servers' against tls.client.trustCertPath
    // unless tls.test.mode.enable.
    "tls.server.authClient",
    "tls.client.authServer",
];

/// Keys whose values are secrets: never written back by [`BrokerConfig::to_properties`].
const SECRET_KEYS: &[&str] = &[
    "haAuthSecret",
    "tls.server.keyPassword",
    "tls.client.keyPassword",
];

/// What a file's keys come to: the config, and the keys that were read but are not acted on.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: BrokerConfig,
    pub ignored: BTreeMap<String, String>,
}

/// The reason a properties line could not be read, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}: cannot parse {text:?} (expected key=value)")]
pub struct PropertiesError {
    pub line: usize,
    pub text: String,
}

/// Java properties, the subset broker.conf files use: `key=value`, `key = value`, `key: value`,
/// `key value`, `#` and `!` comments, blank lines. `(line, key, value)` in file order; a key
/// set twice appears twice (the caller says so, and the last wins).
pub fn parse_properties(text: &str) -> Result<Vec<(usize, String, String)>, PropertiesError> {
    let mut out = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(['#', '!']) {
            continue;
        }
        let end = line
            .find(|c: char| c == '=' || c == ':' || c.is_whitespace())
            .unwrap_or(line.len());
        let (key, rest) = line.split_at(end);
        let rest = rest.trim_start();
        let value = rest
            .strip_prefix(['=', ':'])
            .map(str::trim_start)
            .unwrap_or(rest);
        if key.is_empty() || end == line.len() {
            return Err(PropertiesError {
                line: index + 1,
                text: raw.to_owned(),
            });
        }
        out.push((index + 1, key.to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

/// difflib's ratio on the longest common subsequence: `2 * common / total`, for "did you mean".
fn similarity(a: &str, b: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row = vec![0usize; b.len() + 1];
    for x in &a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    2.0 * row[b.len()] as f64 / total as f64
}

fn closest_key(key: &str) -> Option<String> {
    BrokerConfig::KEYS
        .iter()
        .chain(IGNORED_KEYS)
        .map(|k| (similarity(key, k), *k))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.to_owned())
}

fn is_host_port(text: &str) -> bool {
    match text.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !host.contains(char::is_whitespace)
                && (1..=5).contains(&port.len())
                && port.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

impl BrokerConfig {
    /// Sets one key from its text. An unknown key fails, naming the closest known one.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if self.set_known(key, value)? {
            return Ok(());
        }
        Err(ConfigError::UnknownKey {
            key: key.to_owned(),
            suggestion: closest_key(key),
        })
    }

    /// The defaults with `properties` applied (later keys win), checked as a whole.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Loaded, ConfigError> {
        let mut config = Self::default();
        let mut ignored = BTreeMap::new();
        for (key, value) in properties {
            if IGNORED_KEYS.contains(&key) {
                ignored.insert(key.to_owned(), value.trim().to_owned());
            } else {
                config.set(key, value)?;
            }
        }
        config.validate()?;
        Ok(Loaded { config, ignored })
    }

    /// RocketMQ's key of a snake_case field.
    pub fn key_of(field: &str) -> Option<&'static str> {
        let index = Self::FIELDS.iter().position(|f| *f == field)?;
        Self::KEYS.get(index).copied()
    }

    /// The value of `key` as text, `None` when unset or unknown.
    pub fn get(&self, key: &str) -> Option<String> {
        self.entries()
            .into_iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v)
    }

    /// The config as a `broker.conf` text, secrets left out, `inSyncReplicas` resolved.
    pub fn to_properties(&self) -> String {
        let mut out = String::new();
        for (key, value) in self.entries() {
            let value = match key {
                "inSyncReplicas" => Some(self.in_sync_replicas().to_string()),
                _ if SECRET_KEYS.contains(&key) => None,
                _ => value,
            };
            if let Some(value) = value {
                out.push_str(&format!("{key}={value}\n"));
            }
        }
        out
    }

    /// `inSyncReplicas`, resolved: unset, 2 for a SYNC_MASTER and 1 otherwise.
    pub fn in_sync_replicas(&self) -> i64 {
        self.in_sync_replicas
            .unwrap_or(if self.broker_role == BrokerRole::SyncMaster {
                2
            } else {
                1
            })
    }

    /// Distinct slaves a SYNC_MASTER put waits for.
    pub fn slave_acks_required(&self) -> usize {
        usize::try_from(self.in_sync_replicas() - 1).unwrap_or(0)
    }

    /// Rejects values out of range and settings that contradict each other, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let role = self.broker_role;
        if role == BrokerRole::Slave && self.broker_id == 0 {
            return Err(invalid(
                "brokerId",
                "a SLAVE needs brokerId > 0 (0 is the master)",
            ));
        }
        if role.is_master() && self.broker_id != 0 {
            return Err(invalid(
                "brokerId",
                format!("a {} must have brokerId 0", role.name()),
            ));
        }
        if role == BrokerRole::Slave
            && self.ha_master_address.is_none()
            && self.namesrv_addr.is_none()
        {
            return Err(invalid(
                "haMasterAddress",
                "a SLAVE needs the master's host:port, or namesrvAddr to learn it from",
            ));
        }
        if let Some(addr) = self
            .ha_master_address
            .as_deref()
            .filter(|a| !is_host_port(a))
        {
            return Err(invalid(
                "haMasterAddress",
                format!("'{addr}' is not host:port"),
            ));
        }
        if !(1..4 * MIB).contains(&self.ha_transfer_batch_size) {
            return Err(invalid(
                "haTransferBatchSize",
                "must be positive and below 4 MiB",
            ));
        }
        let size = self.mapped_file_size_commit_log;
        if size <= 0 || size % 4096 != 0 || size > 1 << 31 {
            return Err(invalid(
                "mappedFileSizeCommitLog",
                format!("{size} must be a positive multiple of 4096, at most 2 GiB"),
            ));
        }
        let cq = self.mapped_file_size_consume_queue;
        if cq % 20 != 0 || cq < 20 {
            return Err(invalid(
                "mappedFileSizeConsumeQueue",
                format!(
                    "{cq} must be a positive multiple of 20 (the size of a consume queue entry)"
                ),
            ));
        }
        for (key, port) in [
            ("haListenPort", self.ha_listen_port),
            ("listenPort", self.listen_port),
        ] {
            if !(0..=65535).contains(&port) {
                return Err(invalid(key, "must be in [0, 65535]"));
            }
        }
        for addr in self.namesrv_addr.iter().flat_map(|a| a.split(';')) {
            if !is_host_port(addr.trim()) {
                return Err(invalid("namesrvAddr", format!("'{addr}' is not host:port")));
            }
        }
        if self.default_topic_queue_nums < 1 {
            return Err(invalid("defaultTopicQueueNums", "must be at least 1"));
        }
        if self.broker_permission & !7 != 0 {
            return Err(invalid(
                "brokerPermission",
                "must combine 4 (read), 2 (write), 1 (inherit)",
            ));
        }
        if self.in_sync_replicas() < 1 {
            return Err(invalid(
                "inSyncReplicas",
                "must be at least 1 (the master itself)",
            ));
        }
        for (key, millis) in [
            ("haSendHeartbeatInterval", self.ha_send_heartbeat_interval),
            ("haHousekeepingInterval", self.ha_housekeeping_interval),
            ("slaveTimeout", self.slave_timeout),
            ("syncFlushTimeout", self.sync_flush_timeout),
            ("flushIntervalCommitLog", self.flush_interval_commit_log),
            ("registerNameServerPeriod", self.register_name_server_period),
            (
                "flushConsumerOffsetInterval",
                self.flush_consumer_offset_interval,
            ),
            ("slaveSyncInterval", self.slave_sync_interval),
        ] {
            if millis <= 0 {
                return Err(invalid(key, "must be a positive number of milliseconds"));
            }
        }
        if self.ha_housekeeping_interval <= self.ha_send_heartbeat_interval {
            return Err(invalid(
                "haHousekeepingInterval",
                "must exceed haSendHeartbeatInterval, or idle links are closed between heartbeats",
            ));
        }
        let has_secret = self.ha_auth_secret.is_some()
            || self.ha_auth_secret_file.is_some()
            || self.ha_auth_secret_env.is_some();
        if self.ha_transfer_crc && !has_secret {
            return Err(invalid(
                "haTransferCrc",
                "is negotiated in the auth handshake: set haAuthSecret too",
            ));
        }
        if !(1..=4 * MIB).contains(&self.max_message_size) {
            return Err(invalid("maxMessageSize", "must be in (0, 4 MiB]"));
        }
        if !(0..=100).contains(&self.access_message_in_memory_max_ratio) {
            return Err(invalid(
                "accessMessageInMemoryMaxRatio",
                "must be a percentage",
            ));
        }
        for (key, limit) in [
            (
                "maxTransferBytesOnMessageInMemory",
                self.max_transfer_bytes_on_message_in_memory,
            ),
            (
                "maxTransferCountOnMessageInMemory",
                self.max_transfer_count_on_message_in_memory,
            ),
            (
                "maxTransferBytesOnMessageInDisk",
                self.max_transfer_bytes_on_message_in_disk,
            ),
            (
                "maxTransferCountOnMessageInDisk",
                self.max_transfer_count_on_message_in_disk,
            ),
        ] {
            if limit <= 0 {
                return Err(invalid(
                    key,
                    "must be positive (at 0 no pull could carry a message)",
                ));
            }
        }
        let mode = self.tls_server_mode.to_ascii_lowercase();
        if !["disabled", "permissive", "enforcing"].contains(&mode.as_str()) {
            return Err(invalid(
                "tls.server.mode",
                "must be disabled, permissive or enforcing",
            ));
        }
        let auth = self.tls_server_need_client_auth.to_ascii_lowercase();
        if !["none", "optional", "require"].contains(&auth.as_str()) {
            return Err(invalid(
                "tls.server.need.client.auth",
                "must be none, optional or require",
            ));
        }
        for (key, password) in [
            ("tls.server.keyPassword", &self.tls_server_key_password),
            ("tls.client.keyPassword", &self.tls_client_key_password),
        ] {
            if password.is_some() {
                return Err(invalid(key, ENCRYPTED_KEYS_UNSUPPORTED));
            }
        }
        for (key, addr) in [
            ("haListenAddress", &self.ha_listen_address),
            ("listenAddress", &self.listen_address),
            ("metricsAddress", &self.metrics_address),
        ] {
            if addr.parse::<IpAddr>().is_err() {
                return Err(invalid(key, "must be an IP address"));
            }
        }
        self.clean_config().map(|_| ())
    }

    /// Retention's settings, checked together as the store checks them at open.
    pub fn clean_config(&self) -> Result<CleanConfig, ConfigError> {
        let retention = |problem: String| invalid("retention", problem);
        let unsigned = |key: &str, n: i64| {
            u64::try_from(n).map_err(|_| retention(format!("{key} {n} must not be negative")))
        };
        let ratio = |key: &str, n: i64| {
            u32::try_from(n)
                .map_err(|_| retention(format!("{key} {n} is not a percentage (0-100)")))
        };
        let clean = CleanConfig {
            delete_when: CleanConfig::parse_delete_when(&self.delete_when).map_err(retention)?,
            file_reserved_time: unsigned("fileReservedTime", self.file_reserved_time)?,
            hour: Duration::from_millis(unsigned(
                "fileReservedTimeUnitMs",
                self.file_reserved_time_unit_ms,
            )?),
            disk_max_used_space_ratio: ratio(
                "diskMaxUsedSpaceRatio",
                self.disk_max_used_space_ratio,
            )?,
            disk_space_clean_forcibly_ratio: ratio(
                "diskSpaceCleanForciblyRatio",
                self.disk_space_clean_forcibly_ratio,
            )?,
            disk_space_warning_level_ratio: ratio(
                "diskSpaceWarningLevelRatio",
                self.disk_space_warning_level_ratio,
            )?,
            clean_resource_interval: Duration::from_millis(unsigned(
                "cleanResourceInterval",
                self.clean_resource_interval,
            )?),
            delete_file_batch_max: usize::try_from(unsigned(
                "deleteFileBatchMax",
                self.delete_file_batch_max,
            )?)
            .unwrap_or(usize::MAX),
        };
        clean.validate().map_err(retention)?;
        Ok(clean)
    }
}

/// A validated non-negative value as the unsigned type the services take.
fn narrow<T: TryFrom<i64> + Default>(n: i64) -> T {
    T::try_from(n).unwrap_or_default()
}

fn millis(n: i64) -> Duration {
    Duration::from_millis(narrow(n))
}

impl BrokerConfig {
    /// The store's config, for a broker whose client port is `store_host`
    /// (`brokerIP1:listenPort` with the port actually bound).
    pub fn store_config(&self, store_host: SocketAddr) -> Result<StoreConfig, ConfigError> {
        let mut store = StoreConfig::new(&self.store_path_root_dir);
        store.mapped_file_size = narrow(self.mapped_file_size_commit_log);
        store
            .set_mapped_file_size_consume_queue(narrow(self.mapped_file_size_consume_queue))
            .map_err(|e| invalid("mappedFileSizeConsumeQueue", e))?;
        store.flush_disk_type = self.flush_disk_type;
        store.flush_interval = millis(self.flush_interval_commit_log);
        store.store_host = store_host;
        store.sync_flush_timeout = millis(self.sync_flush_timeout);
        store.sync_slaves = if self.broker_role == BrokerRole::SyncMaster {
            self.slave_acks_required()
        } else {
            0
        };
        store.slave_timeout = millis(self.slave_timeout);
        store.ha_max_gap_not_in_sync = narrow(self.ha_max_gap_not_in_sync);
        store.accept_zero_body_crc = self.ha_accept_zero_body_crc;
        store.clean = self.clean_config()?;
        store.store_path_commit_log = self.store_path_commit_log.as_ref().map(PathBuf::from);
        Ok(store)
    }

    /// The HA side's config, master or slave; `auth_secret` as `haAuthSecret` (or its file or
    /// variable) gives it.
    pub fn ha_config(&self, auth_secret: Option<Vec<u8>>) -> HaConfig {
        HaConfig {
            transfer_batch_size: narrow(self.ha_transfer_batch_size),
            heartbeat_interval: millis(self.ha_send_heartbeat_interval),
            housekeeping_interval: millis(self.ha_housekeeping_interval),
            max_transfer_bytes_per_second: self
                .ha_flow_control_enable
                .then(|| narrow(self.max_ha_transfer_byte_in_second)),
            sync_from_last_file: self.sync_from_last_file,
            auth_secret,
            frame_crc: self.ha_transfer_crc,
            accept_zero_body_crc: self.ha_accept_zero_body_crc,
        }
    }

    /// What the request processors need.
    pub fn settings(&self) -> BrokerSettings {
        BrokerSettings {
            cluster_name: self.broker_cluster_name.clone(),
            broker_name: self.broker_name.clone(),
            broker_id: self.broker_id,
            is_slave: self.broker_role == BrokerRole::Slave,
            auto_create_topic: self.auto_create_topic_enable,
            default_topic_queue_nums: narrow(self.default_topic_queue_nums),
            max_message_size: narrow(self.max_message_size),
            broker_permission: narrow(self.broker_permission),
            slave_read_enable: self.slave_read_enable,
            which_broker_when_consume_slowly: self.which_broker_when_consume_slowly,
            access_message_in_memory_max_ratio: narrow(self.access_message_in_memory_max_ratio),
            long_polling_enable: self.long_polling_enable,
            auto_create_subscription_group: self.auto_create_subscription_group,
            max_transfer_in_memory: TransferLimit {
                bytes: narrow(self.max_transfer_bytes_on_message_in_memory),
                count: narrow(self.max_transfer_count_on_message_in_memory),
            },
            max_transfer_in_disk: TransferLimit {
                bytes: narrow(self.max_transfer_bytes_on_message_in_disk),
                count: narrow(self.max_transfer_count_on_message_in_disk),
            },
        }
    }

    /// The controller's config from the keys; what only a running broker knows (its HA
    /// address, the ACL file found, TLS material read) the caller fills in.
    pub fn controller_config(&self) -> BrokerControllerConfig {
        let slave = !self.broker_role.is_master();
        BrokerControllerConfig {
            settings: self.settings(),
            broker_role: self.broker_role.name().to_owned(),
            broker_ip1: self.broker_ip1.clone(),
            namesrv_addr: self.namesrv_addr.clone().unwrap_or_default(),
            register_name_server_period: millis(self.register_name_server_period),
            ha_server_addr: String::new(),
            // A slave without haMasterAddress follows the master the name servers name; with
            // both, it replicates from its haMasterAddress once they confirm it.
            update_master_ha_server_addr_periodically: slave && self.ha_master_address.is_none(),
            check_master_ha_server_addr: self
                .ha_master_address
                .clone()
                .filter(|_| slave && self.namesrv_addr.is_some()),
            flush_consumer_offset_interval: millis(self.flush_consumer_offset_interval),
            slave_sync_interval: millis(self.slave_sync_interval),
            acl_file: None,
            server: ServerConfig::default(),
            client_tls: None,
        }
    }

    /// What the name servers hand this master's slaves: its HA port on a reachable host
    /// (`brokerIP1` when `haListenAddress` is every interface).
    pub fn advertised_ha_address(&self, port: u16) -> String {
        let host = match self.ha_listen_address.as_str() {
            "0.0.0.0" | "::" => &self.broker_ip1,
            host => host,
        };
        format!("{host}:{port}")
    }
}

/// What a broker refuses an encrypted private key with (rustls reads unencrypted keys only).
pub const ENCRYPTED_KEYS_UNSUPPORTED: &str = "encrypted keys are not supported; decrypt the key \
     once (openssl pkcs8 -topk8 -nocrypt) and keep the file readable only by its server";

#[cfg(test)]
mod tests;
