"""Typed stubs of the native module ``rocketha._core`` (thin PyO3 wrappers over rocketha-core)."""

import os
from typing import Any, Self, final

from rocketha.roles import PutStatus

__version__: str
#: The core's defaults by RocketMQ key (``mappedFileSizeCommitLog``, ``slaveTimeout``, ...).
DEFAULTS: dict[str, int]

def register_put_status(enum_class: type[PutStatus]) -> None: ...
def check_retention(
    *,
    delete_when: str | None = None,
    file_reserved_time: int | None = None,
    file_reserved_time_unit_ms: int | None = None,
    disk_max_used_space_ratio: int | None = None,
    disk_space_clean_forcibly_ratio: int | None = None,
    disk_space_warning_level_ratio: int | None = None,
    clean_resource_interval: int | None = None,
    delete_file_batch_max: int | None = None,
) -> None: ...

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
        *,
        mapped_file_size_commit_log: int | None = None,
        flush_disk_type: str | None = None,
        flush_interval_commit_log: int | None = None,
        sync_flush_timeout: int | None = None,
        store_host: str | None = None,
        mapped_file_size_consume_queue: int | None = None,
        sync_slaves: int | None = None,
        slave_timeout: int | None = None,
        ha_max_gap_not_in_sync: int | None = None,
        read_only: bool = False,
        ha_accept_zero_body_crc: bool = False,
        truncate_at_corruption: bool = False,
        delete_when: str | None = None,
        file_reserved_time: int | None = None,
        file_reserved_time_unit_ms: int | None = None,
        disk_max_used_space_ratio: int | None = None,
        disk_space_clean_forcibly_ratio: int | None = None,
        disk_space_warning_level_ratio: int | None = None,
        clean_resource_interval: int | None = None,
        delete_file_batch_max: int | None = None,
        store_path_commit_log: str | os.PathLike[str] | None = None,
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
    def queues(self) -> list[tuple[str, int, int, int]]: ...
    def segments(self) -> list[tuple[str, int, int]]: ...
    def refresh(self) -> int: ...
    def clean_now(self) -> tuple[float, list[str], int]: ...
    def set_fake_disk_used_ratio(self, ratio: float | None) -> None: ...
    def clean_events(self) -> CleanEventQueue | None: ...
    def scan_error(self) -> tuple[int, str] | None: ...
    def corruption(self) -> tuple[int, int, int, int, str] | None: ...
    def truncate_to(self, offset: int) -> list[str]: ...
    def recovery_report(
        self,
    ) -> tuple[bool, int, int, int, int | None, str | None, str | None, list[str]]: ...
    def flush_stats(self) -> tuple[int, int, int]: ...
    def close(self) -> None: ...

@final
class HAMaster:
    def __new__(
        cls,
        store: MessageStore,
        listen: str,
        *,
        transfer_batch_size: int | None = None,
        heartbeat_interval_ms: int | None = None,
        housekeeping_interval_ms: int | None = None,
        max_transfer_bytes_per_second: int | None = None,
        sync_from_last_file: bool = False,
        auth_secret: bytes | None = None,
    ) -> Self: ...
    @property
    def listen_port(self) -> int: ...
    @property
    def listen_address(self) -> str: ...
    @property
    def push2slave_max_offset(self) -> int: ...
    def connections(self) -> list[dict[str, Any]]: ...
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
        slave_id: int = 1,
        heartbeat_interval_ms: int | None = None,
        housekeeping_interval_ms: int | None = None,
        auth_secret: bytes | None = None,
        frame_crc: bool = False,
        accept_zero_body_crc: bool = False,
    ) -> Self: ...
    @property
    def state(self) -> str: ...
    @property
    def master_address(self) -> str | None: ...
    @property
    def stop_reason(self) -> tuple[int, str, str] | None: ...
    def update_master_address(self, address: str | None) -> None: ...
    def stats(self) -> tuple[int, int, int, int]: ...
    def next_events(self, timeout: float) -> list[tuple[str, str, str, bool]]: ...
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
        *,
        ha_master: HAMaster | None = None,
        ha_client: HAClient | None = None,
        cluster_name: str | None = None,
        broker_name: str | None = None,
        broker_id: int | None = None,
        broker_role: str | None = None,
        broker_ip1: str | None = None,
        namesrv_addr: str | None = None,
        register_name_server_period_ms: int | None = None,
        ha_server_addr: str | None = None,
        update_master_ha_server_addr: bool = False,
        check_master_ha_server_addr: str | None = None,
        auto_create_topic_enable: bool | None = None,
        default_topic_queue_nums: int | None = None,
        max_message_size: int | None = None,
        broker_permission: int | None = None,
        slave_read_enable: bool | None = None,
        which_broker_when_consume_slowly: int | None = None,
        access_message_in_memory_max_ratio: int | None = None,
        long_polling_enable: bool | None = None,
        auto_create_subscription_group: bool | None = None,
        max_transfer_bytes_on_message_in_memory: int | None = None,
        max_transfer_count_on_message_in_memory: int | None = None,
        max_transfer_bytes_on_message_in_disk: int | None = None,
        max_transfer_count_on_message_in_disk: int | None = None,
        flush_consumer_offset_interval_ms: int | None = None,
        slave_sync_interval_ms: int | None = None,
        acl_file: str | os.PathLike[str] | None = None,
        tls: ServerTls | None = None,
        client_tls: ClientTls | None = None,
    ) -> None: ...
    @property
    def listen_address(self) -> str: ...
    @property
    def listen_port(self) -> int: ...
    def register_now(self) -> None: ...
    def sync_from_master_now(self) -> None: ...
    def clients(self) -> list[tuple[str, list[str], list[str]]]: ...
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
    def get_topic_route_info(self, namesrv: str, topic: str, timeout: float) -> bytes | None: ...
    def send_message(
        self,
        addr: str,
        messages: list[Message],
        *,
        producer_group: str,
        queue_id: int,
        timeout: float,
        default_topic: str = ...,
        default_topic_queue_nums: int = 4,
    ) -> tuple[int, str | None, str, int, int, list[str]]: ...
    def send_message_async(
        self,
        addr: str,
        messages: list[Message],
        *,
        producer_group: str,
        queue_id: int,
        timeout: float,
        default_topic: str = ...,
        default_topic_queue_nums: int = 4,
    ) -> int: ...
    def next_completed(
        self, timeout: float
    ) -> list[tuple[int, tuple[int, str | None, str, int, int, list[str]] | RocketHAError]]: ...
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
        default_topic_queue_nums: int = 4,
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
    def get_consumer_id_list_by_group(
        self, addr: str, consumer_group: str, timeout: float
    ) -> list[str]: ...
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
        subscriptions: list[tuple[str, str, int]],
        timeout: float,
    ) -> None: ...

def parse_subscription(topic: str, expression: str) -> tuple[str, list[str]]: ...

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
