"""Typed stubs of the native module ``rocketha._core`` (thin PyO3 wrappers over rocketha-core)."""

import os
from typing import Any, Self, final

from rocketha.roles import PutStatus

__version__: str
#: ``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC``: ``TBW102``.
AUTO_CREATE_TOPIC_KEY_TOPIC: str
#: ``DefaultMQProducer.defaultTopicQueueNums``.
DEFAULT_TOPIC_QUEUE_NUMS: int
#: RocketMQ keys that load but that rocketha does not act on.
IGNORED_KEYS: list[str]

def register_put_status(enum_class: type[PutStatus]) -> None: ...
def broker_config_keys() -> list[tuple[str, str]]: ...
def parse_properties(text: str, source: str) -> list[tuple[int, str, str]]: ...

@final
class BrokerConfig:
    """The core's one broker.conf: every key with its default, typed, checked."""

    def __new__(
        cls,
        properties: dict[str, str] | None = None,
        *,
        source: str | None = None,
        origins: dict[str, str] | None = None,
        **fields: Any,
    ) -> Self: ...
    def __getattr__(self, name: str) -> Any: ...
    def values(self) -> dict[str, Any]: ...
    @property
    def ignored_keys(self) -> dict[str, str]: ...
    def to_properties(self) -> str: ...
    @property
    def slave_acks_required(self) -> int: ...
    def advertised_ha_address(self, port: int) -> str: ...

class RocketHAError(Exception): ...
class ConfigError(RocketHAError): ...
class InvalidMessageError(RocketHAError): ...
class CommitLogCorrupted(RocketHAError): ...
class OffsetMismatch(RocketHAError): ...
class StoreLockedError(RocketHAError): ...
class StoreClosedError(RocketHAError): ...
class NotMasterError(RocketHAError): ...
class HAError(RocketHAError): ...
class ForkedProcessError(RocketHAError): ...
class DiskFullError(RocketHAError): ...
class OffsetTooSmallError(RocketHAError): ...
class RemotingConnectError(RocketHAError): ...
class SendStatusUnknownError(RocketHAError): ...

@final
class Message:
    def __new__(
        cls,
        topic: str,
        body: bytes | bytearray | memoryview | str,
        *,
        tags: str | None = None,
        keys: str | list[str] | tuple[str, ...] | None = None,
        properties: dict[str, object] | None = None,
        queue_id: int = 0,
        flag: int = 0,
    ) -> Self: ...
    @property
    def topic(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def properties(self) -> dict[str, str]: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def flag(self) -> int: ...

@final
class PutResult:
    @property
    def status(self) -> PutStatus: ...
    @property
    def offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
    def with_status(self, status: PutStatus) -> PutResult: ...

@final
class MessageExt:
    @property
    def topic(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def properties(self) -> dict[str, str]: ...
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def commitlog_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def store_size(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def born_timestamp(self) -> int: ...
    @property
    def born_host(self) -> str: ...
    @property
    def store_host(self) -> str: ...
    @property
    def sys_flag(self) -> int: ...
    @property
    def body_crc(self) -> int: ...
    @property
    def flag(self) -> int: ...
    @property
    def reconsume_times(self) -> int: ...
    @property
    def prepared_transaction_offset(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
    def with_topic(self, topic: str) -> MessageExt: ...

@final
class SegmentSlice:
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class CleanEventQueue:
    def next(self, timeout: float) -> list[tuple[bool, str]] | None: ...
    def close(self) -> None: ...

class MessageStore:
    def __new__(
        cls,
        path: str | os.PathLike[str],
        config: BrokerConfig | None = None,
        *,
        store_host: str | None = None,
        sync_slaves: int | None = None,
        read_only: bool = False,
        truncate_at_corruption: bool = False,
    ) -> Self: ...
    def put(self, msg: Message) -> PutResult: ...
    def put_async(self, msg: Message) -> tuple[PutResult, int | None]: ...
    def next_completed(self, timeout: float) -> list[tuple[int, PutStatus]]: ...
    def wake_completed(self) -> None: ...
    def put_batch(self, msgs: list[Message]) -> list[PutResult]: ...
    def append_raw(self, offset: int, data: bytes | memoryview) -> None: ...
    @property
    def max_offset(self) -> int: ...
    @property
    def min_offset(self) -> int: ...
    @property
    def mapped_file_size(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def read_raw(self, offset: int, max_bytes: int) -> memoryview | bytes: ...
    def read_messages(
        self, offset: int, max_count: int, check_crc: bool = False
    ) -> tuple[list[MessageExt], int]: ...
    def get_messages(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int
    ) -> list[MessageExt]: ...
    def find(
        self,
        topic: str,
        key: str,
        *,
        unique: bool = False,
        begin: int = 0,
        end: int = ...,
        max_num: int = 64,
    ) -> list[MessageExt]: ...
    def index_files(self) -> list[str]: ...
    def queues(self) -> list[tuple[str, int, int, int]]: ...
    def segments(self) -> list[tuple[str, int, int]]: ...
    def refresh(self) -> int: ...
    def clean_now(self) -> tuple[float, list[str], int]: ...
    def set_fake_disk_used_ratio(self, ratio: float | None) -> None: ...
    def set_retention_floor(self, offset: int | None) -> None: ...
    def clean_events(self) -> CleanEventQueue | None: ...
    def scan_error(self) -> tuple[int, str] | None: ...
    def corruption(self) -> tuple[int, int, int, int, str] | None: ...
    def truncate_to(self, offset: int) -> list[str]: ...
    def recovery_report(
        self,
    ) -> tuple[bool, int, int, int, int | None, str | None, str | None, list[str]]: ...
    def timer_status(self) -> tuple[bool, int, int, int, int, int, int] | None: ...
    def flush_stats(self) -> tuple[int, int, int]: ...
    def close(self) -> None: ...

@final
class HAMaster:
    def __new__(
        cls,
        store: MessageStore,
        listen: str,
        *,
        config: BrokerConfig | None = None,
        transfer_batch_size: int | None = None,
        heartbeat_interval_ms: int | None = None,
        housekeeping_interval_ms: int | None = None,
        max_transfer_bytes_per_second: int | None = None,
        sync_from_last_file: bool | None = None,
        auth_secret: bytes | None = None,
        epochs: EpochFileCache | None = None,
    ) -> Self: ...
    @property
    def listen_port(self) -> int: ...
    @property
    def listen_address(self) -> str: ...
    def set_sync_state_set(self, slaves: list[int], all_ack: bool) -> None: ...
    @property
    def push2slave_max_offset(self) -> int: ...
    def connections(self) -> list[dict[str, Any]]: ...
    def caught_up(self) -> list[tuple[int, float]]: ...
    def slave_ack_offsets(self) -> list[int]: ...
    def wait_for_ack(self, offset: int, count: int, timeout: float) -> bool: ...
    def next_events(self, timeout: float) -> list[tuple[str, str, str, bool]]: ...
    def shutdown(self) -> None: ...

@final
class HAClient:
    def __new__(
        cls,
        store: MessageStore,
        master_address: str | None = None,
        *,
        config: BrokerConfig | None = None,
        slave_id: int = 1,
        heartbeat_interval_ms: int | None = None,
        housekeeping_interval_ms: int | None = None,
        auth_secret: bytes | None = None,
        frame_crc: bool | None = None,
        accept_zero_body_crc: bool | None = None,
        epochs: EpochFileCache | None = None,
    ) -> Self: ...
    @property
    def state(self) -> str: ...
    @property
    def master_address(self) -> str | None: ...
    @property
    def stop_reason(self) -> tuple[int, str, str] | None: ...
    @property
    def confirm_offset(self) -> int: ...
    def update_master_address(self, address: str | None) -> None: ...
    def stats(self) -> tuple[int, int, int, int]: ...
    def next_events(self, timeout: float) -> list[tuple[str, str, str, bool]]: ...
    def shutdown(self) -> None: ...

@final
class EpochFileCache:
    """The epochs of a broker's log (RocketMQ's ``epochFileCheckpoint``)."""

    def __new__(cls, path: str | os.PathLike[str]) -> Self: ...
    def entries(self) -> list[tuple[int, int]]: ...
    def append(self, epoch: int, start_offset: int) -> bool: ...
    @property
    def last_epoch(self) -> int: ...

@final
class ReplicasManager:
    """RocketMQ 5's ``ReplicasManager``: a broker's registration with the controllers."""

    def __new__(
        cls,
        store: MessageStore,
        epochs: EpochFileCache,
        config: BrokerConfig,
        broker_addr: str,
        identity_path: str | os.PathLike[str],
    ) -> Self: ...
    def start(self) -> None: ...
    def next_decisions(
        self, timeout: float
    ) -> list[tuple[str, int, str | None, int | None, list[int]]]: ...
    def watch(self, master: HAMaster) -> None: ...
    def wake(self) -> None: ...
    def next_events(self, timeout: float) -> list[tuple[str, str, str, bool]]: ...
    def state(
        self,
    ) -> tuple[int | None, int | None, str | None, int, list[int], bool, str | None]: ...
    def alter_sync_state_set(self, members: list[int]) -> tuple[list[int], int]: ...
    def shutdown(self) -> None: ...

@final
class ServerTls:
    def __new__(
        cls,
        mode: str,
        *,
        cert_path: str | os.PathLike[str] | None = None,
        key_path: str | os.PathLike[str] | None = None,
        need_client_auth: str = "none",
        trust_cert_path: str | os.PathLike[str] | None = None,
    ) -> Self: ...
    @property
    def mode(self) -> str: ...

@final
class ClientTls:
    def __new__(
        cls,
        *,
        trust_cert_path: str | os.PathLike[str] | None = None,
        insecure: bool = False,
        cert_path: str | os.PathLike[str] | None = None,
        key_path: str | os.PathLike[str] | None = None,
    ) -> Self: ...

@final
class NameServer:
    def __new__(
        cls,
        listen: str,
        *,
        broker_channel_expired_time_ms: int | None = None,
        tls: ServerTls | None = None,
        kv_config_path: str | os.PathLike[str] | None = None,
    ) -> Self: ...
    @property
    def listen_address(self) -> str: ...
    @property
    def listen_port(self) -> int: ...
    def next_events(self, timeout: float) -> list[tuple[str, str, str, bool]]: ...
    def shutdown(self) -> None: ...

@final
class BrokerController:
    def __new__(cls, listen: str) -> Self: ...
    def start(
        self,
        store: MessageStore,
        config: BrokerConfig,
        *,
        ha_master: HAMaster | None = None,
        ha_client: HAClient | None = None,
        acl_file: str | os.PathLike[str] | None = None,
        tls: ServerTls | None = None,
        client_tls: ClientTls | None = None,
        replicas: ReplicasManager | None = None,
    ) -> None: ...
    @property
    def listen_address(self) -> str: ...
    @property
    def listen_port(self) -> int: ...
    def register_now(self) -> None: ...
    def sync_from_master_now(self) -> None: ...
    def clients(self) -> list[tuple[str, list[str], list[str]]]: ...
    def consumer_lag(self) -> list[tuple[str, str, int, int, int]]: ...
    def next_events(self, timeout: float) -> list[tuple[str, str, str, bool]]: ...
    def shutdown(self) -> None: ...

@final
class MQClientAPI:
    def __new__(
        cls,
        client_ip: str = "127.0.0.1",
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        tls: ClientTls | None = None,
    ) -> Self: ...
    def close(self) -> None: ...
    def invoke_admin(
        self,
        addr: str,
        code: int,
        *,
        ext_fields: dict[str, str],
        body: bytes,
        timeout: float,
    ) -> tuple[int, str | None, dict[str, str], bytes]: ...
    def get_topic_route_info(
        self, namesrv_addr: str, topic: str, timeout: float
    ) -> bytes | None: ...
    def next_transaction_check(
        self, timeout: float
    ) -> tuple[str, dict[str, str], MessageExt] | None: ...
    def query_message(
        self,
        addr: str,
        *,
        topic: str,
        key: str,
        max_num: int,
        begin: int,
        end: int,
        unique: bool,
        timeout: float,
    ) -> list[MessageExt]: ...
    def send_message(
        self,
        addr: str,
        messages: list[Message],
        *,
        producer_group: str,
        queue_id: int,
        timeout: float,
        default_topic: str = ...,
        default_topic_queue_nums: int = ...,
    ) -> tuple[int, str | None, str, int, int, list[str], str | None]: ...
    def send_message_async(
        self,
        addr: str,
        messages: list[Message],
        *,
        producer_group: str,
        queue_id: int,
        timeout: float,
        default_topic: str = ...,
        default_topic_queue_nums: int = ...,
    ) -> int: ...
    def next_completed(
        self, timeout: float
    ) -> list[
        tuple[int, tuple[int, str | None, str, int, int, list[str], str | None] | RocketHAError]
    ]: ...
    def wake_completed(self) -> None: ...
    def send_message_oneway(
        self,
        addr: str,
        messages: list[Message],
        *,
        producer_group: str,
        queue_id: int,
        timeout: float,
        default_topic: str = ...,
        default_topic_queue_nums: int = ...,
    ) -> list[str]: ...
    def send_heartbeat(
        self, addr: str, client_id: str, producer_group: str, timeout: float
    ) -> None: ...
    def unregister_client(
        self,
        addr: str,
        client_id: str,
        *,
        producer_group: str | None = None,
        consumer_group: str | None = None,
        timeout: float,
    ) -> None: ...
    def pull_message_async(
        self,
        addr: str,
        *,
        consumer_group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        max_msg_nums: int,
        sys_flag: int,
        commit_offset: int,
        suspend_timeout_millis: int,
        subscription: str,
        expression_type: str,
        sub_version: int,
        timeout: float,
    ) -> int: ...
    def pull_range(
        self,
        addr: str,
        *,
        consumer_group: str,
        topic: str,
        queue_id: int,
        queue_offset: int,
        end: int,
        max_msg_nums: int,
        window: int,
        max_rows: int,
        sys_flag: int,
        subscription: str,
        filter: RecordFilter,
        timeout: float,
    ) -> tuple[ColumnarBatch, int, tuple[int, str | None, int, int] | None]: ...
    def next_pulled(
        self, timeout: float
    ) -> list[
        tuple[int, tuple[int, str | None, int, int, int, int, list[MessageExt]] | BaseException]
    ]: ...
    def wake_pulled(self) -> None: ...
    def query_consumer_offset(
        self, addr: str, consumer_group: str, topic: str, queue_id: int, timeout: float
    ) -> int | None: ...
    def update_consumer_offset(
        self,
        addr: str,
        consumer_group: str,
        topic: str,
        queue_id: int,
        commit_offset: int,
        *,
        oneway: bool,
        timeout: float,
    ) -> None: ...
    def consumer_send_message_back(
        self,
        addr: str,
        *,
        offset: int,
        group: str,
        delay_level: int,
        origin_msg_id: str,
        origin_topic: str,
        max_reconsume_times: int,
        broker_name: str | None = None,
        timeout: float,
    ) -> tuple[int, str | None]: ...
    def get_consumer_id_list_by_group(
        self, addr: str, consumer_group: str, timeout: float
    ) -> list[str]: ...
    def lock_batch_mq(
        self,
        addr: str,
        group: str,
        client_id: str,
        queues: list[tuple[str, str, int]],
        timeout: float,
    ) -> list[tuple[str, str, int]]: ...
    def unlock_batch_mq(
        self,
        addr: str,
        group: str,
        client_id: str,
        queues: list[tuple[str, str, int]],
        timeout: float,
    ) -> None: ...
    def get_max_offset(self, addr: str, topic: str, queue_id: int, timeout: float) -> int: ...
    def get_min_offset(self, addr: str, topic: str, queue_id: int, timeout: float) -> int: ...
    def search_offset_by_timestamp(
        self, addr: str, topic: str, queue_id: int, timestamp: int, timeout: float
    ) -> int: ...
    def send_consumer_heartbeat(
        self,
        addr: str,
        client_id: str,
        *,
        group: str,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[tuple[str, str, str, int]],
        timeout: float,
    ) -> None: ...
    def check_client_config(
        self,
        addr: str,
        client_id: str,
        *,
        group: str,
        topic: str,
        expression: str,
        expression_type: str,
        timeout: float,
    ) -> None: ...

def parse_subscription(
    topic: str, expression: str, expression_type: str = "TAG"
) -> tuple[str, list[str]]: ...
def standard_json(body: bytes) -> str: ...

@final
class RecordFilter:
    def __new__(
        cls,
        topics: list[str] | None = None,
        queue_bounds: list[tuple[str, int, int, int]] = ...,
    ) -> Self: ...

@final
class ArrowBuffer:
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class ColumnarBatch:
    @property
    def num_rows(self) -> int: ...
    @property
    def record_bytes(self) -> int: ...
    @property
    def null_counts(self) -> tuple[int, int]: ...
    @property
    def property_entries(self) -> int: ...
    def buffers(self) -> list[ArrowBuffer]: ...

@final
class ArrowReader:
    def __new__(
        cls,
        store: MessageStore,
        start: int,
        end: int,
        filter: RecordFilter,
        *,
        max_rows: int,
        max_bytes: int,
        check_crc: bool = False,
    ) -> Self: ...
    def next_batch(self) -> ColumnarBatch | None: ...
    @property
    def offset(self) -> int: ...

def admit(
    store: MessageStore,
    start: int,
    end: int,
    filter: RecordFilter,
    *,
    max_rows: int,
    max_bytes: int,
) -> int: ...
def split_points(store: MessageStore, start: int, end: int, min_parts: int) -> list[int]: ...
