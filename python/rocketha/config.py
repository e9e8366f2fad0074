"""Broker configuration with RocketMQ's ``broker.conf`` keys.

:class:`BrokerConfig` has one snake_case field per RocketMQ key (``brokerRole`` ->
``broker_role``) with RocketMQ's defaults. Load a properties file with
:meth:`BrokerConfig.load`, or build one in code::

    BrokerConfig(broker_role="SYNC_MASTER", store_path_root_dir="/data/store", ha_listen_port=0)

Keys RocketMQ has but rocketha does not act on (``storePathIndex``, ``traceTopicEnable``, ...)
load and are listed in :attr:`BrokerConfig.ignored_keys`, so RocketMQ's own config files work
unchanged.

The keys, their defaults, their parsing and their checks are the core's
(``rocketha._core.BrokerConfig``, which the broker hands to the store and its services whole):
this class is its typed view, and states no default of its own.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rocketha import _core
from rocketha._core import ClientTls, ServerTls
from rocketha.exceptions import ConfigError
from rocketha.roles import BrokerRole, FlushDiskType
from rocketha.tls import client_tls, server_tls

log = logging.getLogger("rocketha.config")

#: RocketMQ broker/store keys accepted and reported as ignored.
IGNORED_KEYS = frozenset(_core.IGNORED_KEYS)

#: RocketMQ's key of each field (``broker_ip1`` -> ``brokerIP1``, ``tls_enable`` -> ``tls.enable``).
_KEYS = dict(_core.broker_config_keys())

#: The core's defaults, by field.
_D = _core.BrokerConfig().values()

_ROLE = BrokerRole(_D["broker_role"])
_FLUSH = FlushDiskType(_D["flush_disk_type"])

#: Fields that are not broker.conf keys.
_OWN = ("ignored_keys", "source")


@dataclass
class BrokerConfig:
    """One broker's settings; field names are RocketMQ's keys in snake_case."""

    broker_cluster_name: str = _D["broker_cluster_name"]
    broker_name: str = _D["broker_name"]
    broker_id: int = _D["broker_id"]
    broker_role: BrokerRole = _ROLE
    flush_disk_type: FlushDiskType = _FLUSH
    store_path_root_dir: str = field(
        default_factory=lambda: _core.BrokerConfig().values()["store_path_root_dir"]
    )
    mapped_file_size_commit_log: int = _D["mapped_file_size_commit_log"]
    mapped_file_size_consume_queue: int = _D["mapped_file_size_consume_queue"]
    #: With ``listenPort`` the store host recorded in every message (and in msg ids).
    broker_ip1: str = _D["broker_ip1"]
    #: The client port (remoting); 0 = OS-chosen, reported by ``Broker.listen_address``.
    listen_port: int = _D["listen_port"]
    #: rocketha: the interface the client port binds (RocketMQ binds all of them).
    listen_address: str = _D["listen_address"]
    #: rocketha: allow a client port on a non-loopback address without ``aclEnable``.
    remoting_allow_insecure: bool = _D["remoting_allow_insecure"]
    #: TLS on the client port: ``disabled``, ``permissive`` (TLS and plain) or ``enforcing``.
    tls_server_mode: str = _D["tls_server_mode"]
    #: The client port's certificate chain and its unencrypted private key, PEM.
    tls_server_cert_path: str | None = _D["tls_server_cert_path"]
    tls_server_key_path: str | None = _D["tls_server_key_path"]
    #: Not supported (encrypted keys): set, the broker refuses to start.
    tls_server_key_password: str | None = field(default=_D["tls_server_key_password"], repr=False)
    #: Client certificates: ``none``, ``optional`` or ``require``, checked against
    #: ``tls.server.trustCertPath``.
    tls_server_need_client_auth: str = _D["tls_server_need_client_auth"]
    tls_server_trust_cert_path: str | None = _D["tls_server_trust_cert_path"]
    #: TLS on the broker's own connections: to name servers, and a slave's to its master.
    tls_enable: bool = _D["tls_enable"]
    #: With ``tls.enable``: trust any server certificate (RocketMQ's default is true; rocketha
    #: verifies against ``tls.client.trustCertPath`` unless this is set).
    tls_test_mode_enable: bool = _D["tls_test_mode_enable"]
    tls_client_trust_cert_path: str | None = _D["tls_client_trust_cert_path"]
    #: The broker's own certificate, for servers that ask for one.
    tls_client_cert_path: str | None = _D["tls_client_cert_path"]
    tls_client_key_path: str | None = _D["tls_client_key_path"]
    #: Not supported (encrypted keys): set, the broker refuses to start.
    tls_client_key_password: str | None = field(default=_D["tls_client_key_password"], repr=False)
    #: Check every client request against ``plain_acl.yml`` (RocketMQ's ACL 1.0).
    acl_enable: bool = _D["acl_enable"]
    #: rocketha: the ACL file; by default ``$ROCKETMQ_HOME/conf/plain_acl.yml``, RocketMQ's.
    acl_plain_file: str | None = _D["acl_plain_file"]
    #: Name servers to register with, ``host:port`` separated by ``;``.
    namesrv_addr: str | None = _D["namesrv_addr"]
    #: Milliseconds between registrations with the name servers.
    register_name_server_period: int = _D["register_name_server_period"]
    #: Registrations carry the topics zlib-compressed (RocketMQ's binary form). A table whose
    #: JSON is over 4 MiB is compressed whatever this says: past 16 MiB it would exceed the
    #: name servers' frame limit.
    compressed_register: bool = _D["compressed_register"]
    #: Sends to an unknown topic create it from ``TBW102`` (RocketMQ 4.x's default: true).
    auto_create_topic_enable: bool = _D["auto_create_topic_enable"]
    #: The topic named after the cluster (16 queues) takes sends and pulls; it exists either
    #: way, so that ``createTopic(cluster, ...)`` finds the cluster's brokers.
    cluster_topic_enable: bool = _D["cluster_topic_enable"]
    #: The same for the topic named after the broker (1 queue).
    broker_topic_enable: bool = _D["broker_topic_enable"]
    #: Queues of the ``TBW102`` template, so at most this many per auto-created topic.
    default_topic_queue_nums: int = _D["default_topic_queue_nums"]
    #: rocketha: the most queues (read or write) a topic may be created with; RocketMQ has no
    #: limit, but each queue is a consume queue the broker maps and a queue every client holds.
    max_topic_queue_nums: int = _D["max_topic_queue_nums"]
    #: 6 = read and write; 4 = read only (sends refused); 2 = write only.
    broker_permission: int = _D["broker_permission"]
    ha_listen_port: int = _D["ha_listen_port"]
    #: rocketha: the interface the HA port binds (RocketMQ binds all of them). Loopback, as
    #: ``listenAddress``, so a minimal conf starts; slaves on other hosts need it opened up
    #: (``haListenAddress=0.0.0.0`` with ``haAuthSecret``).
    ha_listen_address: str = _D["ha_listen_address"]
    ha_master_address: str | None = _D["ha_master_address"]
    ha_send_heartbeat_interval: int = _D["ha_send_heartbeat_interval"]
    ha_housekeeping_interval: int = _D["ha_housekeeping_interval"]
    ha_transfer_batch_size: int = _D["ha_transfer_batch_size"]
    slave_timeout: int = _D["slave_timeout"]
    sync_flush_timeout: int = _D["sync_flush_timeout"]
    #: Replicas, the master included, that must hold a put; defaults to 2 for SYNC_MASTER.
    in_sync_replicas: int | None = None
    ha_max_gap_not_in_sync: int = _D["ha_max_gap_not_in_sync"]
    ha_flow_control_enable: bool = _D["ha_flow_control_enable"]
    max_ha_transfer_byte_in_second: int = _D["max_ha_transfer_byte_in_second"]
    sync_from_last_file: bool = _D["sync_from_last_file"]
    #: Consumers that lag are sent to a slave, and a slave serves pulls.
    slave_read_enable: bool = _D["slave_read_enable"]
    #: Percent of RAM a consumer may lag behind the head before it counts as reading from disk
    #: (and, with ``slaveReadEnable``, is sent to ``whichBrokerWhenConsumeSlowly``); 0 sends
    #: every consumer that is behind at all.
    access_message_in_memory_max_ratio: int = _D["access_message_in_memory_max_ratio"]
    #: The broker id the subscription groups this broker creates send lagging consumers to.
    which_broker_when_consume_slowly: int = _D["which_broker_when_consume_slowly"]
    #: Consumers may subscribe with SQL92 expressions over message properties
    #: (``MessageSelector.by_sql``); off, such subscriptions are refused.
    enable_property_filter: bool = _D["enable_property_filter"]
    #: A suspended pull is held for its ``suspendTimeoutMillis`` (else 1 s) until a message
    #: for its queue arrives.
    long_polling_enable: bool = _D["long_polling_enable"]
    #: Milliseconds between writes of ``config/consumerOffset.json`` (and one at shutdown).
    flush_consumer_offset_interval: int = _D["flush_consumer_offset_interval"]
    #: Consumer groups are created on first use; off, an unknown group is refused.
    auto_create_subscription_group: bool = _D["auto_create_subscription_group"]
    #: The most one pull answers with while its records are in memory (within
    #: ``accessMessageInMemoryMaxRatio`` of the head): bytes, and messages. A bulk reader such
    #: as the Spark source pulls faster with more messages a pull (see the README).
    max_transfer_bytes_on_message_in_memory: int = _D["max_transfer_bytes_on_message_in_memory"]
    max_transfer_count_on_message_in_memory: int = _D["max_transfer_count_on_message_in_memory"]
    #: The same for a consumer so far behind that its records are read from disk.
    max_transfer_bytes_on_message_in_disk: int = _D["max_transfer_bytes_on_message_in_disk"]
    max_transfer_count_on_message_in_disk: int = _D["max_transfer_count_on_message_in_disk"]
    #: rocketha, slave: milliseconds between fetches of the master's topics, consumer offsets
    #: and subscription groups (RocketMQ's fixed 60 s).
    slave_sync_interval: int = _D["slave_sync_interval"]
    flush_interval_commit_log: int = _D["flush_interval_commit_log"]
    max_message_size: int = _D["max_message_size"]
    #: rocketha: shared secret for the HA handshake; or read from a file or an env variable.
    ha_auth_secret: str | None = field(default=_D["ha_auth_secret"], repr=False)
    ha_auth_secret_file: str | None = _D["ha_auth_secret_file"]
    ha_auth_secret_env: str | None = _D["ha_auth_secret_env"]
    #: rocketha, slave: ask the master for a CRC32 on every frame (needs haAuthSecret).
    ha_transfer_crc: bool = _D["ha_transfer_crc"]
    #: rocketha: take records whose BODYCRC is 0 (peers whose batch encoder never fills it in;
    #: Java RocketMQ recomputes it): on a slave, from its master; on open, in the store's own
    #: log. Only exactly 0; size, magic, position and length checks stay on. Off by default.
    ha_accept_zero_body_crc: bool = _D["ha_accept_zero_body_crc"]
    #: rocketha: allow an HA port on a non-loopback address without a secret.
    ha_allow_insecure: bool = _D["ha_allow_insecure"]
    #: rocketha: serve Prometheus metrics (``/metrics``) and the status ``rocketha status``
    #: reads (``/status``) on this port (0 = OS-chosen; None = off).
    metrics_port: int | None = _D["metrics_port"]
    #: rocketha: the interface the metrics port binds; loopback unless asked.
    metrics_address: str = _D["metrics_address"]
    #: Local hours (``04``, or ``04;10``) at which commit log segments older than
    #: ``fileReservedTime`` are deleted (RocketMQ's default: 04).
    delete_when: str = _D["delete_when"]
    #: Hours a commit log segment is kept after its last write.
    file_reserved_time: int = _D["file_reserved_time"]
    #: Percent of the disk used past which expired segments go at any hour.
    disk_max_used_space_ratio: int = _D["disk_max_used_space_ratio"]
    #: Percent past which the oldest segments go even unexpired.
    disk_space_clean_forcibly_ratio: int = _D["disk_space_clean_forcibly_ratio"]
    #: Percent past which puts are refused (SERVICE_NOT_AVAILABLE) until cleaning catches up.
    disk_space_warning_level_ratio: int = _D["disk_space_warning_level_ratio"]
    #: Milliseconds between retention passes.
    clean_resource_interval: int = _D["clean_resource_interval"]
    #: Most commit log segments deleted in one pass.
    delete_file_batch_max: int = _D["delete_file_batch_max"]
    #: rocketha, for tests only: milliseconds in one ``fileReservedTime`` hour.
    file_reserved_time_unit_ms: int = _D["file_reserved_time_unit_ms"]
    #: The commit log's directory; by default ``storePathRootDir/commitlog``.
    store_path_commit_log: str | None = _D["store_path_commit_log"]
    #: The delays of levels 1, 2, ... that a message's ``DELAY`` property picks (units s, m,
    #: h, d; RocketMQ's default ``1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h``).
    message_delay_level: str = _D["message_delay_level"]
    #: Milliseconds between writes of ``config/delayOffset.json`` (and one at shutdown).
    flush_delay_offset_interval: int = _D["flush_delay_offset_interval"]
    #: ``RECALL_MESSAGE`` cancels a timer message by its send's recall handle (off: refused,
    #: RocketMQ's default).
    recall_message_enable: bool = _D["recall_message_enable"]
    #: Queues of the revive topic ``rmq_sys_REVIVE_LOG_<cluster>``, where pops write their
    #: checkpoints and acks.
    revive_queue_num: int = _D["revive_queue_num"]
    #: Percent of pops that read the group's pop retry topic before the topic.
    pop_from_retry_probability: int = _D["pop_from_retry_probability"]
    #: Messages not acked in time go to ``%RETRY%group+topic`` (else ``%RETRY%group_topic``).
    enable_retry_topic_v2: bool = _D["enable_retry_topic_v2"]
    #: With ``enable_retry_topic_v2``: pops still read the v1 retry topic.
    retrieve_message_from_pop_retry_topic_v1: bool = _D["retrieve_message_from_pop_retry_topic_v1"]
    #: A retried message is answered under its retry topic, not the topic popped.
    pop_response_return_actual_retry_topic: bool = _D["pop_response_return_actual_retry_topic"]
    #: Pops held at most per topic while they wait for a message.
    pop_polling_size: int = _D["pop_polling_size"]
    #: The timer store: a message with ``TIMER_DELIVER_MS`` (or ``TIMER_DELAY_SEC`` /
    #: ``TIMER_DELAY_MS``) is delivered at that moment; off, such a send is refused.
    timer_wheel_enable: bool = _D["timer_wheel_enable"]
    #: Milliseconds of one slot of the timer wheel (``timerwheel``).
    timer_precision_ms: int = _D["timer_precision_ms"]
    #: Seconds ahead a timer message may ask for at most (RocketMQ's 3 days); later is refused.
    timer_max_delay_sec: int = _D["timer_max_delay_sec"]
    #: Slots ahead a timer message is placed; a later one rolls over at the window's end.
    timer_roll_window_slot: int = _D["timer_roll_window_slot"]
    #: Milliseconds between msyncs of the timer's files.
    timer_flush_interval_ms: int = _D["timer_flush_interval_ms"]
    #: Bytes of one ``timerlog/`` file.
    mapped_file_size_timer_log: int = _D["mapped_file_size_timer_log"]
    #: Timer messages one slot takes before it refuses some sends (all past twice this).
    timer_congest_num_each_slot: int = _D["timer_congest_num_each_slot"]
    #: Index every message's ``UNIQ_KEY`` and ``KEYS`` under ``index/`` (RocketMQ's format), so
    #: it is found by key: ``QUERY_MESSAGE``, ``mqadmin queryMsgByKey``, ``MessageStore.find``.
    message_index_enable: bool = _D["message_index_enable"]
    #: Hash slots of one index file (4 bytes each, reserved when the file is created).
    max_hash_slot_num: int = _D["max_hash_slot_num"]
    #: Entries of one index file (20 bytes each; one per key of each message).
    max_index_num: int = _D["max_index_num"]
    #: rocketha: a send whose message is not of its topic's ``message.type`` (none reads as
    #: NORMAL; MIXED takes any) is refused with ``MESSAGE_ILLEGAL``. RocketMQ checks this in its
    #: proxy, not in its broker, hence off by default.
    enable_topic_message_type_check: bool = _D["enable_topic_message_type_check"]
    #: Topics may be created or changed to ``message.type=MIXED``.
    enable_mixed_message_type: bool = _D["enable_mixed_message_type"]
    #: Transactional sends are refused (``NO_PERMISSION``).
    reject_transaction_message: bool = _D["reject_transaction_message"]
    #: Milliseconds a half message waits for its producer's outcome before it is checked.
    transaction_time_out: int = _D["transaction_time_out"]
    #: Check-backs of one half message before it is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC``.
    transaction_check_max: int = _D["transaction_check_max"]
    #: Milliseconds between check rounds.
    transaction_check_interval: int = _D["transaction_check_interval"]
    #: rocketha: milliseconds an orderly consumer's queue lock lasts after its holder last
    #: renewed it (RocketMQ's ``-Drocketmq.broker.rebalance.lockMaxLiveTime``, 60 s). A member
    #: that dies keeps its queues this long; keep it above the clients' lock interval (20 s by
    #: default), or a live member loses its queues between renewals.
    rebalance_lock_max_live_time: int = _D["rebalance_lock_max_live_time"]
    #: rocketha: topics (comma-separated) the table tier writes into the Delta table at
    #: ``tableTierPath`` (see :mod:`rocketha.table_tier`; needs ``pip install 'rocketha[table]'``).
    table_tier_topics: str | None = _D["table_tier_topics"]
    table_tier_path: str | None = _D["table_tier_path"]
    #: Milliseconds between the table tier's writes.
    table_tier_interval: int = _D["table_tier_interval"]
    #: Milliseconds: the segment being written goes into the table up to records this old.
    table_tier_tail_age: int = _D["table_tier_tail_age"]
    #: RocketMQ 5's controller mode: the controllers at ``controllerAddr`` elect the group's
    #: master (``brokerRole`` and ``brokerId`` are not read).
    enable_controller_mode: bool = _D["enable_controller_mode"]
    #: The controllers, ``host:port;host:port``.
    controller_addr: str = _D["controller_addr"]
    #: Controller mode: a put waits for every slave of the master's SyncStateSet, so any member
    #: the controller elects holds every acknowledged message. False (RocketMQ's default) waits
    #: for ``inSyncReplicas - 1`` slaves, any of them (none by default: ``inSyncReplicas`` is 1
    #: in controller mode, as RocketMQ 5's).
    all_ack_in_sync_state_set: bool = _D["all_ack_in_sync_state_set"]
    #: Milliseconds between heartbeats to every controller node.
    broker_heartbeat_interval: int = _D["broker_heartbeat_interval"]
    #: Milliseconds the controller keeps this broker alive without a heartbeat.
    controller_heart_beat_timeout_mills: int = _D["controller_heart_beat_timeout_mills"]
    #: Milliseconds between reads of the group's master from the controller (which also tells
    #: the members of each election at once).
    sync_broker_metadata_period: int = _D["sync_broker_metadata_period"]
    #: Milliseconds between looks for the controllers' leader.
    sync_controller_metadata_period: int = _D["sync_controller_metadata_period"]
    #: The controller elects the live candidate with the lowest priority first.
    broker_election_priority: int = _D["broker_election_priority"]
    #: Milliseconds a slave of the SyncStateSet may stay behind before the master drops it.
    ha_max_time_slave_not_catchup: int = _D["ha_max_time_slave_not_catchup"]
    #: Controller mode: while the master's SyncStateSet (itself included) is smaller, a put
    #: that waits for replication is refused before it is written ("in-sync replicas not
    #: enough", SYSTEM_ERROR to a client), whatever ``allAckInSyncStateSet``.
    min_in_sync_replicas: int = _D["min_in_sync_replicas"]

    #: Keys that were read but are not acted on.
    ignored_keys: dict[str, str] = field(default_factory=dict, compare=False)
    #: Where the values came from, for error messages.
    source: str = field(default="<code>", compare=False)

    def __post_init__(self) -> None:
        # The core parses and checks every value, once; the fields take its typed results.
        self._adopt(self._parse())

    def _parse(self) -> _core.BrokerConfig:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _OWN}
        return _core.BrokerConfig(source=self.source, **values)

    def _adopt(self, native: _core.BrokerConfig) -> None:
        """Takes ``native``'s typed values as the fields, and ``native`` as what the services
        are handed, with no second parse."""
        for name, value in native.values().items():
            if name == "broker_role":
                value = BrokerRole(value)
            elif name == "flush_disk_type":
                value = FlushDiskType(value)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_native", native)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name not in _OWN:
            # A field changed in place: the next native() parses the fields as they are now.
            self.__dict__.pop("_native", None)

    def __getstate__(self) -> dict[str, Any]:
        # The core's object stays behind (PySpark pickles configs to its workers); the
        # fields are the config, and the first native() there parses them.
        state = dict(self.__dict__)
        state.pop("_native", None)
        return state

    def _fail(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: {_KEYS[name]}: {problem}")

    def native(self) -> _core.BrokerConfig:
        """The core's config of these fields, checked: what the store, the HA service, the
        replicas manager and the broker's client port are given. Parsed when the config was
        made, and again only after a field was changed in place."""
        native: _core.BrokerConfig | None = self.__dict__.get("_native")
        if native is None:
            native = self._parse()
            object.__setattr__(self, "_native", native)
        return native

    def validate(self) -> None:
        """Rejects settings that contradict each other, naming the key."""
        self.native()

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        properties: dict[str, str] | None = None,
        *,
        properties_source: str = "properties",
        **overrides: Any,
    ) -> BrokerConfig:
        """Reads a RocketMQ properties file. ``properties`` (RocketMQ keys, as on the command
        line) and ``overrides`` (snake_case) win over the file; an error in one of
        ``properties`` names ``properties_source`` (``--set`` for the CLI), not the file.
        Without ``namesrvAddr`` the ``NAMESRV_ADDR`` environment variable names the name
        servers, as for RocketMQ."""
        text = Path(path).read_text(encoding="utf-8")
        props = {**_parse_properties(text, str(path)), **(properties or {})}
        env = os.environ.get("NAMESRV_ADDR")
        if "namesrvAddr" not in props and env:
            props["namesrvAddr"] = env
        origins = dict.fromkeys(properties or {}, properties_source)
        return cls.from_properties(props, source=str(path), origins=origins, **overrides)

    @classmethod
    def from_properties(
        cls,
        props: dict[str, str],
        *,
        source: str = "<properties>",
        origins: dict[str, str] | None = None,
        **overrides: Any,
    ) -> BrokerConfig:
        """``origins``: where a key came from when not from ``source``, for its errors."""
        native = _core.BrokerConfig(props, source=source, origins=origins or {}, **overrides)
        ignored = native.ignored_keys
        # Built around the parse just made: the dataclass's __init__ would parse again.
        config = cls.__new__(cls)
        object.__setattr__(config, "ignored_keys", ignored)
        object.__setattr__(config, "source", source)
        config._adopt(native)
        if ignored:
            # A warning, not INFO: a key the operator set that changes nothing is worth seeing.
            log.warning(
                "%s: keys rocketha does not act on: %s",
                source,
                ", ".join(f"{k}={v}" for k, v in sorted(ignored.items())),
            )
        return config

    # -- derived ---------------------------------------------------------------------------

    @property
    def store_host(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def slave_acks_required(self) -> int:
        """Distinct slaves a SYNC_MASTER put waits for."""
        return self.native().slave_acks_required

    def auth_secret(self) -> bytes | None:
        """The HA secret from ``haAuthSecret``, ``haAuthSecretFile`` or ``haAuthSecretEnv``."""
        if self.ha_auth_secret:
            return self.ha_auth_secret.encode()
        if self.ha_auth_secret_file:
            try:
                secret = Path(self.ha_auth_secret_file).read_text(encoding="utf-8").strip()
            except OSError as e:
                raise self._fail("ha_auth_secret_file", f"cannot read: {e}") from None
            if not secret:
                raise self._fail("ha_auth_secret_file", "the file is empty")
            return secret.encode()
        if self.ha_auth_secret_env:
            secret = os.environ.get(self.ha_auth_secret_env, "")
            if not secret:
                raise self._fail("ha_auth_secret_env", f"${self.ha_auth_secret_env} is not set")
            return secret.encode()
        return None

    def server_tls(self) -> ServerTls | None:
        """The client port's TLS, its certificate and key read and checked now; None when
        ``tls.server.mode`` is ``disabled``."""
        try:
            return server_tls(
                self.tls_server_mode,
                cert_path=self.tls_server_cert_path,
                key_path=self.tls_server_key_path,
                need_client_auth=self.tls_server_need_client_auth,
                trust_cert_path=self.tls_server_trust_cert_path,
            )
        except ConfigError as e:
            raise ConfigError(f"{self.source}: {e}") from None

    def client_tls(self) -> ClientTls | None:
        """TLS for the broker's own connections (``tls.enable``), or None."""
        try:
            return client_tls(
                self.tls_enable,
                trust_cert_path=self.tls_client_trust_cert_path,
                verify=not self.tls_test_mode_enable,
                cert_path=self.tls_client_cert_path,
                key_path=self.tls_client_key_path,
            )
        except ConfigError as e:
            raise ConfigError(f"{self.source}: {e}") from None

    def acl_file(self) -> Path | None:
        """The ``plain_acl.yml`` requests are checked against, or None without ``aclEnable``."""
        if not self.acl_enable:
            if self.acl_plain_file:
                raise self._fail(
                    "acl_plain_file", "is set but aclEnable=false, so nothing is checked"
                )
            return None
        if self.acl_plain_file:
            return Path(self.acl_plain_file)
        home = os.environ.get("ROCKETMQ_HOME")
        if not home:
            raise self._fail(
                "acl_enable",
                "needs the ACL file: set aclPlainFile, or ROCKETMQ_HOME (the file is then "
                "$ROCKETMQ_HOME/conf/plain_acl.yml, as for RocketMQ)",
            )
        return Path(home) / "conf" / "plain_acl.yml"

    def to_properties(self) -> str:
        """The config as a broker.conf text (secrets left out)."""
        return self.native().to_properties()


def parse_key_value(text: str) -> tuple[str, str]:
    """One ``key=value`` of the command line (``rocketha broker --set``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{text!r} is not key=value (a RocketMQ key, e.g. listenPort=10921)")
    return key.strip(), value.strip()


def _parse_properties(text: str, source: str) -> dict[str, str]:
    """Java properties, the subset broker.conf files use (the core's parser)."""
    props: dict[str, str] = {}
    for number, key, value in _core.parse_properties(text, source):
        if key in props:
            log.warning("%s:%d: %s set twice; the last value wins", source, number, key)
        props[key] = value
    return props


__all__ = ["IGNORED_KEYS", "BrokerConfig", "parse_key_value"]
