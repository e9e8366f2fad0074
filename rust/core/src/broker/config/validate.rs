//! The checks a `broker.conf` passes before anything opens: each value in its range, and the
//! keys that must agree with each other, every error naming its key.

use super::{invalid, BrokerConfig, BrokerRole, ConfigError, MIB};
use crate::store::{parse_message_delay_level, CleanConfig};
use std::net::IpAddr;
use std::time::Duration;

/// What a broker refuses an encrypted private key with (rustls reads unencrypted keys only).
const ENCRYPTED_KEYS_UNSUPPORTED: &str = "encrypted keys are not supported; decrypt the key \
     once (openssl pkcs8 -topk8 -nocrypt) and keep the file readable only by its server";

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
    /// Rejects values out of range and settings that contradict each other, naming the key.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.check_role()?;
        self.check_sizes_and_ports()?;
        self.check_timing_and_limits()?;
        self.check_controller_keys()?;
        self.check_network()?;
        self.check_table_tier()?;
        self.clean_config().map(|_| ())
    }

    /// The table tier needs both its topics and its table, and a tail age it can wait.
    fn check_table_tier(&self) -> Result<(), ConfigError> {
        let topics = self
            .table_tier_topics
            .as_deref()
            .is_some_and(|t| t.split(',').any(|n| !n.trim().is_empty()));
        let path = self
            .table_tier_path
            .as_deref()
            .is_some_and(|p| !p.trim().is_empty());
        if topics && !path {
            return Err(invalid(
                "tableTierPath",
                "tableTierTopics is set: name the Delta table's directory too",
            ));
        }
        if path && !topics {
            return Err(invalid(
                "tableTierTopics",
                "tableTierPath is set: name the topics (comma-separated) the table tier writes",
            ));
        }
        if self.table_tier_tail_age < 0 {
            return Err(invalid(
                "tableTierTailAge",
                "must be 0 or more milliseconds",
            ));
        }
        Ok(())
    }

    /// Controller mode: the controller gives the broker its id and role (`brokerId` and
    /// `brokerRole` are not read), and slaves learn their master's HA address from the name
    /// servers, as RocketMQ's do.
    fn check_controller_mode(&self) -> Result<(), ConfigError> {
        let addrs: Vec<&str> = self
            .controller_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        if addrs.is_empty() {
            return Err(invalid(
                "controllerAddr",
                "enableControllerMode=true needs the controllers, host:port;host:port",
            ));
        }
        if let Some(bad) = addrs.iter().find(|a| !is_host_port(a)) {
            return Err(invalid(
                "controllerAddr",
                format!("'{bad}' is not host:port"),
            ));
        }
        if self.namesrv_addr.is_none() {
            return Err(invalid(
                "namesrvAddr",
                "enableControllerMode=true needs the name servers: a slave learns its master's \
                 HA address from them",
            ));
        }
        if self.ha_master_address.is_some() {
            return Err(invalid(
                "haMasterAddress",
                "in controller mode the controller names the master; remove haMasterAddress",
            ));
        }
        Ok(())
    }

    /// `brokerRole` against `brokerId` and the master's address.
    fn check_role(&self) -> Result<(), ConfigError> {
        if self.enable_controller_mode {
            return self.check_controller_mode();
        }
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
        Ok(())
    }

    /// Segment and batch sizes, ports, name servers and the topic template's keys.
    fn check_sizes_and_ports(&self) -> Result<(), ConfigError> {
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
        for (key, n) in [
            ("maxHashSlotNum", self.max_hash_slot_num),
            ("maxIndexNum", self.max_index_num),
        ] {
            if n < 1 || n > i64::from(i32::MAX) {
                return Err(invalid(key, "must be a positive int"));
            }
        }
        self.index_config()
            .validate()
            .map_err(|e| invalid("maxIndexNum", e))?;
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
        if self.max_topic_queue_nums < self.default_topic_queue_nums
            || self.max_topic_queue_nums > i64::from(i32::MAX)
        {
            return Err(invalid(
                "maxTopicQueueNums",
                format!(
                    "must be at least defaultTopicQueueNums ({}) and fit an int",
                    self.default_topic_queue_nums
                ),
            ));
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
        Ok(())
    }

    /// Controller mode's intervals and election keys (checked whatever the mode, so a wrong
    /// value is found before the mode is turned on).
    fn check_controller_keys(&self) -> Result<(), ConfigError> {
        for (key, millis) in [
            ("brokerHeartbeatInterval", self.broker_heartbeat_interval),
            (
                "controllerHeartBeatTimeoutMills",
                self.controller_heart_beat_timeout_mills,
            ),
            ("syncBrokerMetadataPeriod", self.sync_broker_metadata_period),
            (
                "syncControllerMetadataPeriod",
                self.sync_controller_metadata_period,
            ),
            (
                "haMaxTimeSlaveNotCatchup",
                self.ha_max_time_slave_not_catchup,
            ),
        ] {
            if millis <= 0 {
                return Err(invalid(key, "must be a positive number of milliseconds"));
            }
        }
        if self.min_in_sync_replicas < 1 || i32::try_from(self.min_in_sync_replicas).is_err() {
            return Err(invalid(
                "minInSyncReplicas",
                "must be at least 1 (the master itself) and fit an int",
            ));
        }
        if i32::try_from(self.broker_election_priority).is_err() {
            return Err(invalid(
                "brokerElectionPriority",
                format!(
                    "{} is not a 32-bit integer (RocketMQ's is an int)",
                    self.broker_election_priority
                ),
            ));
        }
        Ok(())
    }

    /// Every interval and timeout in milliseconds is positive.
    fn check_intervals(&self) -> Result<(), ConfigError> {
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
            ("flushDelayOffsetInterval", self.flush_delay_offset_interval),
            ("transactionTimeOut", self.transaction_time_out),
            ("transactionCheckInterval", self.transaction_check_interval),
            (
                "rebalanceLockMaxLiveTime",
                self.rebalance_lock_max_live_time,
            ),
            ("tableTierInterval", self.table_tier_interval),
        ] {
            if millis <= 0 {
                return Err(invalid(key, "must be a positive number of milliseconds"));
            }
        }
        Ok(())
    }

    /// Intervals, HA's keys, and what a message and a pull may carry.
    fn check_timing_and_limits(&self) -> Result<(), ConfigError> {
        self.check_intervals()?;
        parse_message_delay_level(&self.message_delay_level)
            .map_err(|e| invalid("messageDelayLevel", e))?;
        self.timer_config()
            .validate()
            .map_err(|(key, e)| invalid(key, e))?;
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
        if !(1..=64).contains(&self.revive_queue_num) {
            return Err(invalid(
                "reviveQueueNum",
                "must be in [1, 64] (queues of the revive topic)",
            ));
        }
        if !(0..=100).contains(&self.pop_from_retry_probability) {
            return Err(invalid("popFromRetryProbability", "must be a percentage"));
        }
        if !(1..=1_000_000).contains(&self.pop_polling_size) {
            return Err(invalid("popPollingSize", "must be in [1, 1000000]"));
        }
        if !(1..=i64::from(i32::MAX)).contains(&self.transaction_check_max) {
            return Err(invalid(
                "transactionCheckMax",
                "must be a positive number of checks",
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
        Ok(())
    }

    /// TLS modes and keys, and the addresses the ports bind.
    fn check_network(&self) -> Result<(), ConfigError> {
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
        Ok(())
    }
    /// Retention's settings, checked together as the store checks them at open.
    pub(crate) fn clean_config(&self) -> Result<CleanConfig, ConfigError> {
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
