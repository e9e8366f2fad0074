"""``rocketha namesrv`` as a child process, spoken to over a raw socket in RocketMQ's remoting
protocol (JSON headers), the way a Java broker and client would."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import RemotingSocket, broker_fields, spawn_rocketha_namesrv, wait_for
from rocketha import NameServer

REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC = 103, 104, 105
SUCCESS, TOPIC_NOT_EXIST, REQUEST_CODE_NOT_SUPPORTED = 0, 17, 3
PUT_KV_CONFIG, GET_KV_CONFIG = 100, 101


REGISTER_BODY = json.dumps(
    {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000},
            "topicConfigTable": {
                name: {
                    "topicName": name,
                    "readQueueNums": 4,
                    "writeQueueNums": 4,
                    "perm": 6,
                }
                for name in ("TopicTest", "OtherTopic")
            },
        },
    }
).encode()


def test_register_route_and_stop(namesrv_process: tuple[subprocess.Popen[str], str]) -> None:
    proc, listen = namesrv_process
    assert listen.startswith("127.0.0.1:") and not listen.endswith(":0")
    broker = RemotingSocket(listen)
    master = broker_fields(0, "127.0.0.1:10911", "127.0.0.1:10912", REGISTER_BODY)
    response, _ = broker.invoke(REGISTER_BROKER, master, REGISTER_BODY)
    assert response["code"] == SUCCESS, response
    slave = broker_fields(1, "127.0.0.1:10921", "127.0.0.1:10922", REGISTER_BODY)
    response, _ = broker.invoke(REGISTER_BROKER, slave, REGISTER_BODY)
    assert response["code"] == SUCCESS, response
    # The slave learns its master's HA address from the answer.
    assert response["extFields"]["haServerAddr"] == "127.0.0.1:10912"
    assert response["extFields"]["masterAddr"] == "127.0.0.1:10911"

    client = RemotingSocket(listen)
    response, body = client.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    assert response["code"] == SUCCESS, response
    route = json.loads(body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {
        "0": "127.0.0.1:10911",
        "1": "127.0.0.1:10921",
    }
    assert route["queueDatas"][0]["writeQueueNums"] == 4
    # An old client gets fastjson's bare integer keys, as the Java name server writes them.
    _, old = client.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, version=0)
    assert b'"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}' in old

    response, _ = client.invoke(9999, {})
    assert response["code"] == REQUEST_CODE_NOT_SUPPORTED
    assert response["remark"] == " request type 9999 not supported"

    unregister = {k: master[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    response, _ = broker.invoke(UNREGISTER_BROKER, unregister)
    assert response["code"] == SUCCESS
    slave_only = {k: slave[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    broker.invoke(UNREGISTER_BROKER, slave_only)
    response, _ = client.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    assert response["code"] == TOPIC_NOT_EXIST
    assert response["remark"].startswith(
        "No topic route info in name server for the topic: TopicTest"
    )
    broker.close()
    client.close()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline()) == {"stopped": True}


def test_a_closed_broker_connection_leaves_the_routes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rocketha.namesrv")
    with NameServer("127.0.0.1:0") as namesrv:
        broker = RemotingSocket(namesrv.listen_address)
        fields = broker_fields(0, "127.0.0.1:10911", "127.0.0.1:10912", REGISTER_BODY)
        assert broker.invoke(REGISTER_BROKER, fields, REGISTER_BODY)[0]["code"] == SUCCESS
        client = RemotingSocket(namesrv.listen_address)
        assert client.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": "OtherTopic"})[0]["code"] == 0
        broker.close()

        def route_gone() -> bool:
            response, _ = client.invoke(GET_ROUTEINFO_BY_TOPIC, {"topic": "OtherTopic"})
            return bool(response["code"] == TOPIC_NOT_EXIST)

        wait_for(route_gone, timeout=30, what="the closed broker's route to go")
        client.close()

        def logged(event: str) -> bool:
            return any(f"127.0.0.1:10911 {event}: " in r.getMessage() for r in caplog.records)

        wait_for(lambda: logged("REGISTERED"), timeout=30, what="the registration logged")
        wait_for(lambda: logged("UNREGISTERED"), timeout=30, what="the unregistration logged")


def test_non_loopback_listen_needs_allow_insecure() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rocketha", "namesrv", "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--allow-insecure" in result.stderr
    assert "rewrite the routes" in result.stderr


def test_the_kv_config_outlives_a_restart_in_its_file(tmp_path: Path) -> None:
    """``rocketha namesrv --kv-config PATH``: what PUT_KV_CONFIG (``mqadmin updateKvConfig``)
    stored is read back after the name server is stopped and started again; a file that is
    not a KV config stops the start with a line naming it."""
    kv = tmp_path / "namesrv" / "kvConfig.json"
    entry = {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders"}
    with spawn_rocketha_namesrv(tmp_path / "first.log", "--kv-config", str(kv)) as ns:
        sock = RemotingSocket(ns.address)
        response, _ = sock.invoke(PUT_KV_CONFIG, {**entry, "value": "broker-a:8"})
        assert response["code"] == 0, response
        sock.close()
    with spawn_rocketha_namesrv(tmp_path / "again.log", "--kv-config", str(kv)) as ns:
        sock = RemotingSocket(ns.address)
        response, _ = sock.invoke(GET_KV_CONFIG, entry)
        assert response["extFields"]["value"] == "broker-a:8", response
        sock.close()
    kv.write_text("not a kv config")
    refused = subprocess.run(
        [sys.executable, "-m", "rocketha", "namesrv", "--listen", "127.0.0.1:0", "--kv-config", kv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert f"kvConfigPath {kv}: {kv} is not a KV config file" in refused.stderr, refused.stderr
