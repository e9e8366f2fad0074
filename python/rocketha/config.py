"""Broker configuration with RocketMQ's ``broker.conf`` keys.

:class:`BrokerConfig` has one snake_case field per RocketMQ key (``brokerRole`` ->
``broker_role``) with RocketMQ's defaults. Load a properties file with
:meth:`BrokerConfig.load`, or build one in code::

    BrokerConfig(broker_role="SYNC_MASTER", store_path_root_dir="/data/store", ha_listen_port=0)

Keys RocketMQ has but rocketha does not act on (``storePathIndex``, ``traceTopicEnable``, ...)
load and are listed in :attr:`BrokerConfig.ignored_keys`, so RocketMQ's own config files work
unchanged.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import os
import re
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from rocketha._core import DEFAULTS as _DEFAULTS
from rocketha._core import ClientTls, ServerTls, check_retention
from rocketha.exceptions import ConfigError
from rocketha.roles import BrokerRole, FlushDiskType
from rocketha.tls import ENCRYPTED_KEYS_UNSUPPORTED, client_tls, server_tls

log = logging.getLogger("rocketha.config")

MiB = 1024 * 1024

#: RocketMQ broker/store keys accepted and reported as ignored.
IGNORED_KEYS = frozenset(
    [
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
        # rocketha checks client certificates against tls.server.trustCertPath whenever
        # tls.server.need.client.auth asks for one, and servers' against
        # tls.client.trustCertPath unless tls.test.mode.enable.
        "tls.server.authClient",
        "tls.client.authServer",
    ]
)


#: Keys whose RocketMQ spelling is not plain camelCase.
_IRREGULAR = {
    "broker_ip1": "brokerIP1",
    # TlsSystemConfig's, read by RocketMQ as system properties or from tls.config.file.
    "tls_server_mode": "tls.server.mode",
    "tls_server_cert_path": "tls.server.certPath",
    "tls_server_key_path": "tls.server.keyPath",
    "tls_server_key_password": "tls.server.keyPassword",
    "tls_server_need_client_auth": "tls.server.need.client.auth",
    "tls_server_trust_cert_path": "tls.server.trustCertPath",
    "tls_enable": "tls.enable",
    "tls_test_mode_enable": "tls.test.mode.enable",
    "tls_client_trust_cert_path": "tls.client.trustCertPath",
    "tls_client_cert_path": "tls.client.certPath",
    "tls_client_key_path": "tls.client.keyPath",
    "tls_client_key_password": "tls.client.keyPassword",
}


def _camel(name: str) -> str:
    if name in _IRREGULAR:
        return _IRREGULAR[name]
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclass
class BrokerConfig:
    """One broker's settings; field names are RocketMQ's keys in snake_case."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    store_path_root_dir: str = field(default_factory=lambda: str(Path.home() / "store"))
    mapped_file_size_commit_log: int = _DEFAULTS["mappedFileSizeCommitLog"]
    mapped_file_size_consume_queue: int = _DEFAULTS["mappedFileSizeConsumeQueue"]
    #: With ``listenPort`` the store host recorded in every message (and in msg ids).
    broker_ip1: str = "127.0.0.1"
    #: The client port (remoting); 0 = OS-chosen, reported by ``Broker.listen_address``.
    listen_port: int = 10911
    #: rocketha: the interface the client port binds (RocketMQ binds all of them).
    listen_address: str = "127.0.0.1"
    #: rocketha: allow a client port on a non-loopback address without ``aclEnable``.
    remoting_allow_insecure: bool = False
    #: TLS on the client port: ``disabled``, ``permissive`` (TLS and plain) or ``enforcing``.
    tls_server_mode: str = "disabled"
    #: The client port's certificate chain and its unencrypted private key, PEM.
    tls_server_cert_path: str | None = None
    tls_server_key_path: str | None = None
    #: Not supported (encrypted keys): set, the broker refuses to start.
    tls_server_key_password: str | None = dataclasses.field(default=None, repr=False)
    #: Client certificates: ``none``, ``optional`` or ``require``, checked against
    #: ``tls.server.trustCertPath``.
    tls_server_need_client_auth: str = "none"
    tls_server_trust_cert_path: str | None = None
    #: TLS on the broker's own connections: to name servers, and a slave's to its master.
    tls_enable: bool = False
    #: With ``tls.enable``: trust any server certificate (RocketMQ's default is true; rocketha
    #: verifies against ``tls.client.trustCertPath`` unless this is set).
    tls_test_mode_enable: bool = False
    tls_client_trust_cert_path: str | None = None
    #: The broker's own certificate, for servers that ask for one.
    tls_client_cert_path: str | None = None
    tls_client_key_path: str | None = None
    #: Not supported (encrypted keys): set, the broker refuses to start.
    tls_client_key_password: str | None = dataclasses.field(default=None, repr=False)
    #: Check every client request against ``plain_acl.yml`` (RocketMQ's ACL 1.0).
    acl_enable: bool = False
    #: rocketha: the ACL file; by default ``$ROCKETMQ_HOME/conf/plain_acl.yml``, RocketMQ's.
    acl_plain_file: str | None = None
    #: Name servers to register with, ``host:port`` separated by ``;``.
    namesrv_addr: str | None = None
    #: Milliseconds between registrations with the name servers.
    register_name_server_period: int = 30000
    #: Sends to an unknown topic create it from ``TBW102`` (RocketMQ 4.x's default: true).
    auto_create_topic_enable: bool = True
    #: Queues of the ``TBW102`` template, so at most this many per auto-created topic.
    default_topic_queue_nums: int = 8
    #: 6 = read and write; 4 = read only (sends refused); 2 = write only.
    broker_permission: int = 6
    ha_listen_port: int = 10912
    #: rocketha: the interface the HA port binds (RocketMQ binds all of them). Loopback, as
    #: ``listenAddress``, so a minimal conf starts; slaves on other hosts need it opened up
    #: (``haListenAddress=0.0.0.0`` with ``haAuthSecret``).
    ha_listen_address: str = "127.0.0.1"
    ha_master_address: str | None = None
    ha_send_heartbeat_interval: int = _DEFAULTS["haSendHeartbeatInterval"]
    ha_housekeeping_interval: int = _DEFAULTS["haHousekeepingInterval"]
    ha_transfer_batch_size: int = _DEFAULTS["haTransferBatchSize"]
    slave_timeout: int = _DEFAULTS["slaveTimeout"]
    sync_flush_timeout: int = _DEFAULTS["syncFlushTimeout"]
    #: Replicas, the master included, that must hold a put; defaults to 2 for SYNC_MASTER.
    in_sync_replicas: int | None = None
    ha_max_gap_not_in_sync: int = _DEFAULTS["haMaxGapNotInSync"]
    ha_flow_control_enable: bool = False
    max_ha_transfer_byte_in_second: int = 100 * MiB
    sync_from_last_file: bool = False
    #: Consumers that lag are sent to a slave, and a slave serves pulls.
    slave_read_enable: bool = False
    #: Percent of RAM a consumer may lag behind the head before it counts as reading from disk
    #: (and, with ``slaveReadEnable``, is sent to ``whichBrokerWhenConsumeSlowly``); 0 sends
    #: every consumer that is behind at all.
    access_message_in_memory_max_ratio: int = 40
    #: The broker id the subscription groups this broker creates send lagging consumers to.
    which_broker_when_consume_slowly: int = 1
    #: A suspended pull is held for its ``suspendTimeoutMillis`` (else 1 s) until a message
    #: for its queue arrives.
    long_polling_enable: bool = True
    #: Milliseconds between writes of ``config/consumerOffset.json`` (and one at shutdown).
    flush_consumer_offset_interval: int = 5000
    #: Consumer groups are created on first use; off, an unknown group is refused.
    auto_create_subscription_group: bool = True
    #: The most one pull answers with while its records are in memory (within
    #: ``accessMessageInMemoryMaxRatio`` of the head): bytes, and messages. A bulk reader such
    #: as the Spark source pulls faster with more messages a pull (see the README).
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    #: The same for a consumer so far behind that its records are read from disk.
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    #: rocketha, slave: milliseconds between fetches of the master's topics, consumer offsets
    #: and subscription groups (RocketMQ's fixed 60 s).
    slave_sync_interval: int = 60000
    flush_interval_commit_log: int = _DEFAULTS["flushIntervalCommitLog"]
    max_message_size: int = 4 * MiB
    #: rocketha: shared secret for the HA handshake; or read from a file or an env variable.
    ha_auth_secret: str | None = dataclasses.field(default=None, repr=False)
    ha_auth_secret_file: str | None = None
    ha_auth_secret_env: str | None = None
    #: rocketha, slave: ask the master for a CRC32 on every frame (needs haAuthSecret).
    ha_transfer_crc: bool = False
    #: rocketha: take records whose BODYCRC is 0 (peers whose batch encoder never fills it in;
    #: Java RocketMQ recomputes it): on a slave, from its master; on open, in the store's own
    #: log. Only exactly 0; size, magic, position and length checks stay on. Off by default.
    ha_accept_zero_body_crc: bool = False
    #: rocketha: allow an HA port on a non-loopback address without a secret.
    ha_allow_insecure: bool = False
    #: rocketha: serve Prometheus metrics (``/metrics``) and the status ``rocketha status``
    #: reads (``/status``) on this port (0 = OS-chosen; None = off).
    metrics_port: int | None = None
    #: rocketha: the interface the metrics port binds; loopback unless asked.
    metrics_address: str = "127.0.0.1"
    #: Local hours (``04``, or ``04;10``) at which commit log segments older than
    #: ``fileReservedTime`` are deleted (RocketMQ's default: 04).
    delete_when: str = "04"
    #: Hours a commit log segment is kept after its last write.
    file_reserved_time: int = _DEFAULTS["fileReservedTime"]
    #: Percent of the disk used past which expired segments go at any hour.
    disk_max_used_space_ratio: int = _DEFAULTS["diskMaxUsedSpaceRatio"]
    #: Percent past which the oldest segments go even unexpired.
    disk_space_clean_forcibly_ratio: int = _DEFAULTS["diskSpaceCleanForciblyRatio"]
    #: Percent past which puts are refused (SERVICE_NOT_AVAILABLE) until cleaning catches up.
    disk_space_warning_level_ratio: int = _DEFAULTS["diskSpaceWarningLevelRatio"]
    #: Milliseconds between retention passes.
    clean_resource_interval: int = _DEFAULTS["cleanResourceInterval"]
    #: Most commit log segments deleted in one pass.
    delete_file_batch_max: int = _DEFAULTS["deleteFileBatchMax"]
    #: rocketha, for tests only: milliseconds in one ``fileReservedTime`` hour.
    file_reserved_time_unit_ms: int = 3_600_000
    #: The commit log's directory; by default ``storePathRootDir/commitlog``.
    store_path_commit_log: str | None = None

    #: Keys that were read but are not acted on.
    ignored_keys: dict[str, str] = field(default_factory=dict, compare=False)
    #: Where the values came from, for error messages.
    source: str = field(default="<code>", compare=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("ignored_keys", "source"):
                continue
            setattr(self, f.name, self._coerce(f.name, getattr(self, f.name)))
        if self.in_sync_replicas is None:
            self.in_sync_replicas = 2 if self.broker_role is BrokerRole.SYNC_MASTER else 1
        self.validate()

    def _fail(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: {_camel(name)}: {problem}")

    def _coerce(self, name: str, value: Any) -> Any:
        kind = _FIELD_TYPES[name]
        if value is None:
            if "None" in kind:
                return None
            raise self._fail(name, "a value is required")
        if isinstance(value, Enum):
            value = value.value
        try:
            if "BrokerRole" in kind:
                return BrokerRole(str(value).strip().upper())
            if "FlushDiskType" in kind:
                return FlushDiskType(str(value).strip().upper())
            if kind.startswith("bool"):
                if isinstance(value, bool):
                    return value
                text = str(value).strip().lower()
                if text not in ("true", "false"):
                    raise ValueError
                return text == "true"
            if kind.startswith("int"):
                if isinstance(value, bool):
                    raise ValueError
                return int(str(value).strip()) if not isinstance(value, int) else value
            return str(value).strip() if "None" not in kind or str(value).strip() else None
        except ValueError:
            choices = ""
            if "BrokerRole" in kind:
                choices = f" (one of {', '.join(r.value for r in BrokerRole)})"
            elif "FlushDiskType" in kind:
                choices = f" (one of {', '.join(t.value for t in FlushDiskType)})"
            raise self._fail(name, f"bad value {value!r}, expected {kind}{choices}") from None

    def validate(self) -> None:
        """Rejects settings that contradict each other, naming the key."""
        role = self.broker_role
        if role is BrokerRole.SLAVE and self.broker_id == 0:
            raise self._fail("broker_id", "a SLAVE needs brokerId > 0 (0 is the master)")
        if role.is_master and self.broker_id != 0:
            raise self._fail("broker_id", f"a {role.value} must have brokerId 0")
        if role is BrokerRole.SLAVE and not (self.ha_master_address or self.namesrv_addr):
            raise self._fail(
                "ha_master_address",
                "a SLAVE needs the master's host:port, or namesrvAddr to learn it from",
            )
        if self.ha_master_address and not re.fullmatch(r"\S+:\d{1,5}", self.ha_master_address):
            raise self._fail("ha_master_address", f"{self.ha_master_address!r} is not host:port")
        if not 0 < self.ha_transfer_batch_size < 4 * MiB:
            raise self._fail("ha_transfer_batch_size", "must be positive and below 4 MiB")
        size = self.mapped_file_size_commit_log
        if size <= 0 or size % 4096 or size > 2**31:
            raise self._fail(
                "mapped_file_size_commit_log",
                f"{size} must be a positive multiple of 4096, at most 2 GiB",
            )
        if self.mapped_file_size_consume_queue % 20 or self.mapped_file_size_consume_queue < 20:
            raise self._fail("mapped_file_size_consume_queue", "must be a multiple of 20")
        for port in ("ha_listen_port", "listen_port"):
            if not 0 <= getattr(self, port) <= 65535:
                raise self._fail(port, "must be in [0, 65535]")
        if self.namesrv_addr is not None:
            for addr in self.namesrv_addr.split(";"):
                if not re.fullmatch(r"\S+:\d{1,5}", addr.strip()):
                    raise self._fail("namesrv_addr", f"{addr!r} is not host:port")
        if self.default_topic_queue_nums < 1:
            raise self._fail("default_topic_queue_nums", "must be at least 1")
        if self.broker_permission & ~7:
            raise self._fail("broker_permission", "must combine 4 (read), 2 (write), 1 (inherit)")
        if self.in_sync_replicas is not None and self.in_sync_replicas < 1:
            raise self._fail("in_sync_replicas", "must be at least 1 (the master itself)")
        for name in (
            "ha_send_heartbeat_interval",
            "ha_housekeeping_interval",
            "slave_timeout",
            "sync_flush_timeout",
            "flush_interval_commit_log",
            "register_name_server_period",
            "flush_consumer_offset_interval",
            "slave_sync_interval",
        ):
            if getattr(self, name) <= 0:
                raise self._fail(name, "must be a positive number of milliseconds")
        if self.ha_housekeeping_interval <= self.ha_send_heartbeat_interval:
            raise self._fail(
                "ha_housekeeping_interval",
                "must exceed haSendHeartbeatInterval, or idle links are closed between heartbeats",
            )
        has_secret = self.ha_auth_secret or self.ha_auth_secret_file or self.ha_auth_secret_env
        if self.ha_transfer_crc and not has_secret:
            raise self._fail(
                "ha_transfer_crc", "is negotiated in the auth handshake: set haAuthSecret too"
            )
        if not 0 < self.max_message_size <= 4 * MiB:
            raise self._fail("max_message_size", "must be in (0, 4 MiB]")
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise self._fail("access_message_in_memory_max_ratio", "must be a percentage")
        for where in ("memory", "disk"):
            for what in ("bytes", "count"):
                name = f"max_transfer_{what}_on_message_in_{where}"
                if getattr(self, name) <= 0:
                    raise self._fail(name, "must be positive (at 0 no pull could carry a message)")
        if self.tls_server_mode.lower() not in ("disabled", "permissive", "enforcing"):
            raise self._fail("tls_server_mode", "must be disabled, permissive or enforcing")
        if self.tls_server_need_client_auth.lower() not in ("none", "optional", "require"):
            raise self._fail("tls_server_need_client_auth", "must be none, optional or require")
        for name in ("tls_server_key_password", "tls_client_key_password"):
            if getattr(self, name):
                raise self._fail(name, ENCRYPTED_KEYS_UNSUPPORTED)
        for name in ("ha_listen_address", "listen_address", "metrics_address"):
            try:
                ipaddress.ip_address(getattr(self, name))
            except ValueError:
                raise self._fail(name, "must be an IP address") from None
        try:
            check_retention(**self.retention_options())
        except (ConfigError, OverflowError) as e:
            # The core names the key; negative numbers fail its unsigned conversion.
            raise ConfigError(f"{self.source}: retention: {e}") from None

    def retention_options(self) -> dict[str, Any]:
        """The retention keys as :class:`MessageStore` keywords."""
        return {
            "delete_when": self.delete_when,
            "file_reserved_time": self.file_reserved_time,
            "file_reserved_time_unit_ms": self.file_reserved_time_unit_ms,
            "disk_max_used_space_ratio": self.disk_max_used_space_ratio,
            "disk_space_clean_forcibly_ratio": self.disk_space_clean_forcibly_ratio,
            "disk_space_warning_level_ratio": self.disk_space_warning_level_ratio,
            "clean_resource_interval": self.clean_resource_interval,
            "delete_file_batch_max": self.delete_file_batch_max,
        }

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
        origins = origins or {}
        known = {_camel(n): n for n in _FIELD_TYPES}
        kwargs: dict[str, Any] = {}
        ignored: dict[str, str] = {}
        for key, value in props.items():
            if key in known:
                kwargs[known[key]] = value
            elif key in IGNORED_KEYS:
                ignored[key] = value
            else:
                close = difflib.get_close_matches(key, [*known, *IGNORED_KEYS], n=1, cutoff=0.7)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"{origins.get(key, source)}: unknown key {key!r}{hint}")
        kwargs.update(overrides)
        try:
            config = cls(**kwargs, ignored_keys=ignored, source=source)
        except ConfigError as e:
            # A bad value from the command line is named as given there, not as the file's.
            for key, origin in origins.items():
                prefix = f"{source}: {key}: "
                if str(e).startswith(prefix):
                    raise ConfigError(
                        f"{origin} {key}={props[key]}: {str(e)[len(prefix) :]}"
                    ) from None
            raise
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
        return max(0, (self.in_sync_replicas or 1) - 1)

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
        lines = []
        for f in fields(self):
            if f.name in ("ignored_keys", "source", "ha_auth_secret") or f.name.endswith(
                "key_password"
            ):
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, bool):
                value = str(value).lower()
            lines.append(f"{_camel(f.name)}={value}")
        return "\n".join(lines) + "\n"


_FIELD_TYPES: dict[str, str] = {
    f.name: str(f.type) for f in fields(BrokerConfig) if f.name not in ("ignored_keys", "source")
}


def parse_key_value(text: str) -> tuple[str, str]:
    """One ``key=value`` of the command line (``rocketha broker --set``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{text!r} is not key=value (a RocketMQ key, e.g. listenPort=10921)")
    return key.strip(), value.strip()


def _parse_properties(text: str, source: str) -> dict[str, str]:
    """Java properties, the subset broker.conf files use: ``key=value``, ``key = value``,
    ``key: value``, ``#`` and ``!`` comments, blank lines."""
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{source}:{number}: cannot parse {raw!r} (expected key=value)")
        key, value = m.group(1), m.group(2).strip()
        if key in props:
            log.warning("%s:%d: %s set twice; the last value wins", source, number, key)
        props[key] = value
    return props


__all__ = ["IGNORED_KEYS", "BrokerConfig", "parse_key_value"]
