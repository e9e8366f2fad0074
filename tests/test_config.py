"""broker.conf loading and validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_conf
from rocketha import Broker, BrokerConfig, BrokerRole, ConfigError, FlushDiskType, Message, _core

CONF = Path(__file__).parent.parent / "examples" / "conf"
EXAMPLES = [*sorted(CONF.rglob("*.properties")), CONF / "broker.conf"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_example_config_loads(path: Path) -> None:
    # As the README starts them: with -n, from which the slaves learn their master.
    config = BrokerConfig.load(path, namesrv_addr="127.0.0.1:9876")
    assert config.broker_name.startswith("broker-")
    # Retention keys are acted on now; the examples set them.
    assert config.delete_when == "04" and "deleteWhen" not in config.ignored_keys


def test_keys_map_to_fields_with_rocketmq_defaults(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "b.conf",
        brokerRole="SYNC_MASTER",
        flushDiskType="SYNC_FLUSH",
        haListenPort=0,
        slaveTimeout=1500,
        namesrvAddr="127.0.0.1:9876",
        deleteWhen="04",
        aclEnable="true",
        traceTopicEnable="false",
    )
    c = BrokerConfig.load(conf)
    assert c.broker_role is BrokerRole.SYNC_MASTER
    assert c.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert (c.ha_listen_port, c.slave_timeout, c.in_sync_replicas) == (0, 1500, 2)
    assert (c.ha_send_heartbeat_interval, c.ha_housekeeping_interval) == (5000, 20000)
    assert c.ha_transfer_batch_size == 32768 and c.ha_max_gap_not_in_sync == 256 * 1024 * 1024
    assert c.ignored_keys == {"traceTopicEnable": "false"} and c.acl_enable
    assert (c.delete_when, c.file_reserved_time, c.disk_max_used_space_ratio) == ("04", 72, 75)
    assert (c.namesrv_addr, c.listen_address, c.auto_create_topic_enable) == (
        "127.0.0.1:9876",
        "127.0.0.1",
        True,
    )
    assert BrokerConfig(broker_role="ASYNC_MASTER").in_sync_replicas == 1


def test_rocketha_keys_for_foreign_peers(tmp_path: Path) -> None:
    """haAcceptZeroBodyCrc (off by default) and the 4 KiB segments rocketmq-rust tests use."""
    assert BrokerConfig().ha_accept_zero_body_crc is False
    conf = write_conf(tmp_path / "b.conf", haAcceptZeroBodyCrc=True, mappedFileSizeCommitLog=4096)
    c = BrokerConfig.load(conf)
    assert (c.ha_accept_zero_body_crc, c.mapped_file_size_commit_log) == (True, 4096)
    assert "haAcceptZeroBodyCrc=true" in c.to_properties()


def test_spacing_and_comments(tmp_path: Path) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("# comment\n! also a comment\n\nbrokerName = x\nbrokerId:0\n")
    assert BrokerConfig.load(conf).broker_name == "x"


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"brokerRol": "SLAVE"}, "unknown key 'brokerRol'; did you mean 'brokerRole'"),
        ({"brokerRole": "MASTER"}, "brokerRole: bad value 'MASTER'"),
        ({"haListenPort": "ten"}, "haListenPort: bad value"),
        ({"brokerRole": "SLAVE", "haMasterAddress": "h:1"}, "brokerId: a SLAVE needs brokerId > 0"),
        ({"brokerId": 2}, "brokerId: a ASYNC_MASTER must have brokerId 0"),
        ({"haTransferBatchSize": 4 * 1024 * 1024}, "haTransferBatchSize"),
        ({"brokerRole": "SLAVE", "brokerId": 1}, "haMasterAddress: a SLAVE needs"),
        ({"mappedFileSizeCommitLog": 1000}, "mappedFileSizeCommitLog"),
        ({"slaveReadEnable": "yes"}, "slaveReadEnable: bad value 'yes'"),
        ({"haHousekeepingInterval": 100}, "haHousekeepingInterval"),
    ],
)
def test_errors_name_the_key_and_file(tmp_path: Path, keys: dict, message: str) -> None:
    conf = write_conf(tmp_path / "bad.conf", **keys)
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(conf)
    assert message in str(err.value)
    assert str(conf) in str(err.value)


def test_secret_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret").write_text("s3cret\n")
    assert BrokerConfig(ha_auth_secret_file=str(tmp_path / "secret")).auth_secret() == b"s3cret"
    monkeypatch.setenv("HA_SECRET", "fromenv")
    assert BrokerConfig(ha_auth_secret_env="HA_SECRET").auth_secret() == b"fromenv"
    with pytest.raises(ConfigError, match="haAuthSecretEnv"):
        BrokerConfig(ha_auth_secret_env="NOPE_NOT_SET").auth_secret()
    assert "s3cret" not in repr(BrokerConfig(ha_auth_secret="s3cret"))
    assert "s3cret" not in BrokerConfig(ha_auth_secret="s3cret").to_properties()


def test_consume_side_keys_load_and_are_checked(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "b.conf",
        slaveReadEnable="true",
        whichBrokerWhenConsumeSlowly=2,
        accessMessageInMemoryMaxRatio=0,
        longPollingEnable="false",
        flushConsumerOffsetInterval=1000,
        autoCreateSubscriptionGroup="false",
        slaveSyncInterval=500,
    )
    c = BrokerConfig.load(conf)
    assert c.ignored_keys == {}
    assert (c.slave_read_enable, c.which_broker_when_consume_slowly) == (True, 2)
    assert (c.access_message_in_memory_max_ratio, c.long_polling_enable) == (0, False)
    assert (c.flush_consumer_offset_interval, c.slave_sync_interval) == (1000, 500)
    assert c.auto_create_subscription_group is False
    defaults = BrokerConfig()
    assert (defaults.flush_consumer_offset_interval, defaults.slave_sync_interval) == (5000, 60000)
    assert defaults.long_polling_enable and defaults.auto_create_subscription_group
    with pytest.raises(ConfigError, match="slaveSyncInterval: must be a positive"):
        BrokerConfig(slave_sync_interval=0)
    with pytest.raises(ConfigError, match="accessMessageInMemoryMaxRatio: must be a percentage"):
        BrokerConfig(access_message_in_memory_max_ratio=101)


def test_pull_transfer_limits_load_with_rocketmqs_defaults_and_are_checked(tmp_path: Path) -> None:
    c = BrokerConfig.load(write_conf(tmp_path / "b.conf", maxTransferCountOnMessageInMemory=1024))
    assert c.ignored_keys == {}
    assert c.max_transfer_count_on_message_in_memory == 1024
    d = BrokerConfig()
    assert (
        d.max_transfer_bytes_on_message_in_memory,
        d.max_transfer_count_on_message_in_memory,
    ) == (
        256 * 1024,
        32,
    )
    assert (d.max_transfer_bytes_on_message_in_disk, d.max_transfer_count_on_message_in_disk) == (
        64 * 1024,
        8,
    )
    with pytest.raises(ConfigError, match="maxTransferBytesOnMessageInDisk: must be positive"):
        BrokerConfig(max_transfer_bytes_on_message_in_disk=0)


def test_store_path_commit_log_reaches_the_store(tmp_path: Path) -> None:
    conf = BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"),
        store_path_commit_log=str(tmp_path / "log"),
        ha_listen_port=0,
        listen_port=0,
        ha_listen_address="127.0.0.1",
    )
    assert "storePathCommitLog" not in conf.ignored_keys
    with Broker(conf) as broker:
        broker.put(Message("T", b"x"))
    assert any((tmp_path / "log").iterdir())


def test_the_core_holds_the_config_and_the_view_states_no_default() -> None:
    from rocketha import _core

    native = _core.BrokerConfig(
        {"brokerName": "b", "traceTopicEnable": "false"},
        source="b.conf",
        origins={"listenPort": "--set"},
        broker_role=BrokerRole.SYNC_MASTER,
    )
    assert (native.broker_name, native.broker_role, native.in_sync_replicas) == (
        "b",
        "SYNC_MASTER",
        2,
    )
    assert native.ignored_keys == {"traceTopicEnable": "false"}
    assert "brokerName=b\n" in native.to_properties()
    assert BrokerConfig().to_properties() == _core.BrokerConfig().to_properties()
    assert BrokerConfig(broker_name="b", broker_role="SYNC_MASTER").native().values() == (
        _core.BrokerConfig({"brokerName": "b", "brokerRole": "SYNC_MASTER"}).values()
    )
    with pytest.raises(ConfigError, match=r"^--set listenPort=x: bad value 'x'"):
        _core.BrokerConfig({"listenPort": "x"}, source="b.conf", origins={"listenPort": "--set"})
    with pytest.raises(ConfigError, match=r"^b\.conf: brokerId: "):
        _core.BrokerConfig({"brokerId": "3"}, source="b.conf")
    with pytest.raises(TypeError, match="no_such_field"):
        _core.BrokerConfig(no_such_field=1)


def test_a_broker_parses_its_config_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loaded from broker.conf and started, the config is parsed and checked by the core once;
    # the store, the HA side and the client port are handed that one parse.
    parsed: list[object] = []
    real = _core.BrokerConfig

    def counting(*args: object, **kwargs: object) -> _core.BrokerConfig:
        parsed.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_core, "BrokerConfig", counting)
    conf = write_conf(
        tmp_path / "b.conf",
        storePathRootDir=tmp_path / "store",
        listenPort=0,
        haListenPort=0,
    )
    with Broker(BrokerConfig.load(conf)) as broker:
        broker.put(Message("T", b"x"))
    assert len(parsed) == 1
    # A field changed in place is what the next start is given: parsed again, then once.
    config = BrokerConfig.load(conf)
    config.listen_port = 0
    config.store_path_root_dir = str(tmp_path / "other")
    assert config.native().store_path_root_dir == str(tmp_path / "other")
    assert config.native() is config.native()
    assert len(parsed) == 3
