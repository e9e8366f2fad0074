//! The services' configs, derived from the one [`BrokerConfig`]: the store's, HA's, the request
//! processors' and the controller's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{invalid, BrokerConfig, BrokerRole, ConfigError};
use crate::broker::replicas_manager::{BrokerIdentity, ReplicasConfig};
use crate::broker::{
    BrokerControllerConfig, BrokerSettings, PopSettings, TransactionSettings, TransferLimit,
};
use crate::ha::HaConfig;
use crate::remoting::ServerConfig;
use crate::store::{parse_message_delay_level, IndexConfig, StoreConfig, TimerConfig};

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
        store.min_in_sync_replicas = narrow(self.min_in_sync_replicas);
        store.accept_zero_body_crc = self.ha_accept_zero_body_crc;
        store.clean = self.clean_config()?;
        store.store_path_commit_log = self.store_path_commit_log.as_ref().map(PathBuf::from);
        store.message_delay_level = parse_message_delay_level(&self.message_delay_level)
            .map_err(|e| invalid("messageDelayLevel", e))?;
        store.flush_delay_offset_interval = millis(self.flush_delay_offset_interval);
        store.index = self.index_config();
        store.timer = self.timer_config();
        Ok(store)
    }

    pub(crate) fn timer_config(&self) -> TimerConfig {
        TimerConfig {
            enable: self.timer_wheel_enable,
            precision_ms: self.timer_precision_ms,
            max_delay_sec: self.timer_max_delay_sec,
            roll_window_slots: self.timer_roll_window_slot,
            flush_interval: millis(self.timer_flush_interval_ms),
            log_file_size: narrow(self.mapped_file_size_timer_log),
            congest_num_each_slot: self.timer_congest_num_each_slot,
        }
    }

    pub(crate) fn index_config(&self) -> IndexConfig {
        IndexConfig {
            enabled: self.message_index_enable,
            max_hash_slot_num: narrow(self.max_hash_slot_num),
            max_index_num: narrow(self.max_index_num),
        }
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
            epochs: None,
        }
    }

    /// What the request processors need.
    pub(crate) fn settings(&self) -> BrokerSettings {
        BrokerSettings {
            cluster_name: self.broker_cluster_name.clone(),
            broker_name: self.broker_name.clone(),
            broker_id: self.broker_id,
            is_slave: self.broker_role == BrokerRole::Slave,
            auto_create_topic: self.auto_create_topic_enable.into(),
            cluster_topic_enable: self.cluster_topic_enable,
            broker_topic_enable: self.broker_topic_enable,
            default_topic_queue_nums: narrow(self.default_topic_queue_nums),
            max_topic_queue_nums: narrow(self.max_topic_queue_nums),
            max_message_size: self.max_message_size.into(),
            broker_permission: self.broker_permission.into(),
            slave_read_enable: self.slave_read_enable.into(),
            which_broker_when_consume_slowly: self.which_broker_when_consume_slowly,
            access_message_in_memory_max_ratio: narrow(self.access_message_in_memory_max_ratio),
            long_polling_enable: self.long_polling_enable,
            compressed_register: self.compressed_register,
            rebalance_lock_max_live_time: millis(self.rebalance_lock_max_live_time),
            enable_property_filter: self.enable_property_filter,
            auto_create_subscription_group: self.auto_create_subscription_group.into(),
            max_transfer_in_memory: TransferLimit {
                bytes: narrow(self.max_transfer_bytes_on_message_in_memory),
                count: narrow(self.max_transfer_count_on_message_in_memory),
            },
            max_transfer_in_disk: TransferLimit {
                bytes: narrow(self.max_transfer_bytes_on_message_in_disk),
                count: narrow(self.max_transfer_count_on_message_in_disk),
            },
            recall_message_enable: self.recall_message_enable,
            transaction: TransactionSettings {
                reject: self.reject_transaction_message,
                time_out: millis(self.transaction_time_out),
                check_max: narrow(self.transaction_check_max),
                check_interval: millis(self.transaction_check_interval),
                file_reserved: Duration::from_millis(
                    u64::try_from(
                        self.file_reserved_time
                            .saturating_mul(self.file_reserved_time_unit_ms),
                    )
                    .unwrap_or(0),
                ),
            },
            enable_topic_message_type_check: self.enable_topic_message_type_check,
            enable_mixed_message_type: self.enable_mixed_message_type,
            pop: PopSettings {
                revive_queue_num: narrow(self.revive_queue_num),
                pop_from_retry_probability: narrow(self.pop_from_retry_probability),
                enable_retry_topic_v2: self.enable_retry_topic_v2,
                retrieve_from_retry_topic_v1: self.retrieve_message_from_pop_retry_topic_v1,
                response_return_actual_retry_topic: self.pop_response_return_actual_retry_topic,
                polling_size: narrow(self.pop_polling_size),
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
            broker_config: self.clone(),
            replicas: None,
        }
    }

    /// Controller mode's `ReplicasManager`, for a broker whose client port is `broker_addr`
    /// (`brokerIP1:listenPort` with the port actually bound) and whose store keeps its broker
    /// id at `identity_path`.
    pub fn replicas_config(&self, broker_addr: String, identity_path: PathBuf) -> ReplicasConfig {
        ReplicasConfig {
            identity: BrokerIdentity {
                cluster_name: self.broker_cluster_name.clone(),
                broker_name: self.broker_name.clone(),
                broker_addr,
            },
            identity_path,
            heartbeat_interval: millis(self.broker_heartbeat_interval),
            controller_heartbeat_timeout: millis(self.controller_heart_beat_timeout_mills),
            sync_broker_metadata_period: millis(self.sync_broker_metadata_period),
            sync_controller_metadata_period: millis(self.sync_controller_metadata_period),
            election_priority: narrow(self.broker_election_priority),
        }
    }

    /// `controllerAddr`: the controllers, `host:port` separated by `;`.
    pub fn controller_addrs(&self) -> Vec<String> {
        self.controller_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
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
