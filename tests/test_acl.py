"""RocketMQ's ACL 1.0 on the client port (``aclEnable=true``, ``plain_acl.yml``), with the
project's own clients: right keys send and consume; a wrong secret, a missing key and a
forbidden topic or group get NO_PERMISSION and store nothing; the file is reloaded when it
changes, and a broken edit keeps the policy in force. The same checks with the Java client's
``AclClientRPCHook`` are in ``tests/interop/test_rocketmq_client.py``."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SEGMENT, wait_for
from rocketha import (
    Broker,
    BrokerConfig,
    ConfigError,
    ConsumeFromWhere,
    Message,
    MQBrokerError,
    MQClientError,
    NameServer,
    Producer,
    PullConsumer,
    RocketHAError,
    SendStatus,
    SessionCredentials,
)
from rocketha.acl import mq_client_api

NO_PERMISSION = 16

PLAIN_ACL = """\
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
"""

GOOD = SessionCredentials("RocketMQ", "12345678")


def acl_config(tmp_path: Path, namesrv: str, **keys: object) -> BrokerConfig:
    return BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=SEGMENT,
        listen_port=0,
        ha_listen_port=0,
        ha_listen_address="127.0.0.1",
        namesrv_addr=namesrv,
        **keys,  # type: ignore[arg-type]
    )


def refused(producer: Producer, topic: str) -> MQBrokerError:
    with pytest.raises(MQBrokerError) as err:
        producer.send(Message(topic, b"refused"))
    assert err.value.code == NO_PERMISSION, err.value
    return err.value


def test_acl_with_our_clients(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(PLAIN_ACL)
    with NameServer("127.0.0.1:0") as ns:
        config = acl_config(tmp_path, ns.listen_address, acl_enable=True, acl_plain_file=acl)
        with Broker(config) as broker:
            with Producer(ns.listen_address, "p", credentials=GOOD) as producer:
                result = wait_for(lambda: producer.send(Message("topicB", b"signed")), what="send")
                assert result.status is SendStatus.SEND_OK
                stored = broker.store.max_offset

                assert "No PUB permission for topic topicC" in refused(producer, "topicC").remark
                assert "No PUB permission for topic other" in refused(producer, "other").remark
            wrong = SessionCredentials("RocketMQ", "not-the-secret")
            with Producer(ns.listen_address, "p", credentials=wrong) as producer:
                remark = refused(producer, "topicB").remark
                assert remark == "Check signature failed for accessKey=RocketMQ"
            with Producer(ns.listen_address, "p") as producer:
                assert refused(producer, "topicB").remark == "No accessKey is configured"
            assert broker.store.max_offset == stored, "a refused send stored nothing"

            with PullConsumer(
                ns.listen_address,
                "groupB",
                "topicB",
                credentials=GOOD,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            ) as consumer:
                bodies = wait_for(lambda: [m.body for m in consumer.poll(0.5)], what="a pull")
            assert bodies == [b"signed"]
            with pytest.raises(MQClientError, match="code 16: No SUB permission for group groupA"):
                PullConsumer(ns.listen_address, "groupA", "topicB", credentials=GOOD)
            api = mq_client_api("127.0.0.1", GOOD)
            try:
                denied = "code 16: No SUB permission for group groupA"
                with pytest.raises(RocketHAError, match=denied):
                    api.update_consumer_offset(
                        broker.listen_address, "groupA", "topicB", 0, 1, oneway=False, timeout=5
                    )
            finally:
                api.close()

            # The CLI signs too, with the secret key from the environment.
            cli = [sys.executable, "-m", "rocketha", "produce", "--namesrv", ns.listen_address]
            cli += ["--topic", "topicB", "--count", "1", "--access-key", "RocketMQ"]
            env = {k: v for k, v in os.environ.items() if k != "ROCKETHA_SECRET_KEY"}
            unset = subprocess.run(cli, env=env, capture_output=True, text=True)
            assert unset.returncode != 0 and "$ROCKETHA_SECRET_KEY" in unset.stderr, unset
            env["ROCKETHA_SECRET_KEY"] = "12345678"
            subprocess.run(cli, env=env, check=True, capture_output=True)
            assert broker.store.max_offset > stored

            # An edit is in force within the housekeeping's half-second look.
            acl.write_text(PLAIN_ACL.replace("topicC=SUB", "topicC=PUB"))
            with Producer(ns.listen_address, "p", credentials=GOOD) as producer:

                def sent_to_c() -> bool:
                    try:
                        return producer.send(Message("topicC", b"now")).status is SendStatus.SEND_OK
                    except MQBrokerError as e:
                        assert e.code == NO_PERMISSION, e
                        return False

                wait_for(sent_to_c, what="the reloaded plain_acl.yml")
                with caplog.at_level(logging.INFO, logger="rocketha.broker"):
                    acl.write_text("accounts: [")
                    wait_for(lambda: "ACL_RELOAD_FAILED" in caplog.text, what="the reload error")
                assert "stays in force" in caplog.text
                assert producer.send(Message("topicC", b"still")).status is SendStatus.SEND_OK


def test_acl_settings_are_checked_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with pytest.raises(ConfigError, match="aclEnable: needs the ACL file"):
        Broker(acl_config(tmp_path, "127.0.0.1:1", acl_enable=True)).start()
    with pytest.raises(ConfigError, match="aclPlainFile: is set but aclEnable=false"):
        Broker(acl_config(tmp_path, "127.0.0.1:1", acl_plain_file="x.yml")).start()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text("accounts:\n  - accessKey: short\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match=r"conf/plain_acl.yml: accounts\[0\]: accessKey must"):
        Broker(acl_config(tmp_path, "127.0.0.1:1", acl_enable=True)).start()
    # ACL is what makes a non-loopback client port acceptable without remotingAllowInsecure.
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    open_port = acl_config(tmp_path, "127.0.0.1:1", listen_address="0.0.0.0")
    with pytest.raises(ConfigError, match=r"without aclEnable.*Set aclEnable=true"):
        Broker(open_port).start()
    with Broker(dataclasses.replace(open_port, acl_enable=True)) as broker:
        assert broker.store.max_offset == 0
