"""Messages found by key and by msgId (issue #27's IndexService): ``MessageStore.find`` on a
store, ``Admin.find`` / ``find_by_id`` over the network through a master and, with the master
gone, through its slave, whose index its replication built; and the index after a kill."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import broker_pair, wait_for
from rocketha import Admin, Message, MessageStore, MQClientError, NameServer, Producer


def test_a_store_finds_every_key_after_a_reopen_and_a_reader_finds_them_too(
    tmp_path: Path,
) -> None:
    store = MessageStore(tmp_path, mapped_file_size_commit_log=1 << 20)
    puts = [store.put(Message("orders", b"%d" % i, keys=[f"o{i % 50}", "all"])) for i in range(500)]
    assert [m.body for m in store.find("orders", "o7")] == [b"%d" % i for i in range(7, 500, 50)]
    assert len(store.find("orders", "all")) == 64
    assert len(store.find("orders", "all", max_num=10)) == 10
    # A message put straight into a store has no UNIQ_KEY unless it brings one.
    tagged = store.put(Message("orders", b"u", properties={"UNIQ_KEY": "U-1"}))
    assert [m.commitlog_offset for m in store.find("orders", "U-1", unique=True)] == [tagged.offset]
    assert store.find("orders", "U-1") == [] and store.find("orders", "o7", unique=True) == []
    assert puts[7].offset == store.find("orders", "o7")[0].commitlog_offset
    assert store.find("orders", "nobody") == [] and store.find("other", "o7") == []
    assert len(store.index_files()) == 1
    store.close()

    again = MessageStore(tmp_path)
    assert len(again.find("orders", "o7")) == 10
    again.put(Message("orders", b"late", keys="o7"))
    reader = MessageStore(tmp_path, read_only=True)
    assert [m.body for m in again.find("orders", "o7")][-1] == b"late"
    wait_for(lambda: len(reader.find("orders", "o7")) == 11, what="the reader to see the new entry")
    again.close()


def test_a_store_killed_mid_stream_finds_exactly_what_it_kept(tmp_path: Path) -> None:
    """A writer SIGKILLed while putting keyed messages: after the reopen every message the
    log kept is found by its key, once."""
    script = (
        "import sys\n"
        "from rocketha import Message, MessageStore\n"
        "s = MessageStore(sys.argv[1], mapped_file_size_commit_log=1 << 20)\n"
        "i = 0\n"
        "while True:\n"
        "    s.put(Message('T', b'x' * 100, keys=[f'k{i}', 'every']))\n"
        "    if i == 2000: print('ready', flush=True)\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.kill()
    proc.wait()
    store = MessageStore(tmp_path)
    kept = list(store.messages())
    assert len(kept) > 2000
    for msg in kept[:: len(kept) // 40]:
        key = msg.keys[0]
        assert [m.commitlog_offset for m in store.find("T", key)] == [msg.commitlog_offset]
    newest = store.find("T", "every")
    assert [m.commitlog_offset for m in newest] == [m.commitlog_offset for m in kept[-64:]]


def test_admin_finds_through_the_master_then_through_the_slave(tmp_path: Path) -> None:
    with (
        NameServer("127.0.0.1:0") as ns,
        broker_pair(tmp_path, "broker-a", ns.listen_address) as (master, slave),
        Producer(ns.listen_address, "find-producer") as producer,
        Admin(ns.listen_address) as admin,
    ):
        sent = [
            producer.send(Message("Orders", b"order %d" % i, keys=[f"order-{i}", "customer-9"]))
            for i in range(20)
        ]
        found = wait_for(lambda: admin.find("Orders", "order-4"), what="order-4")
        assert [m.body for m in found] == [b"order 4"]
        assert admin.find_by_id("Orders", sent[11].msg_id).body == b"order 11"
        every = admin.find("Orders", "customer-9")
        assert [m.body for m in every] == [b"order %d" % i for i in range(20)]
        assert admin.find("Orders", "order-404") == []
        assert admin.find_by_id("Orders", "0" * 32) is None
        with pytest.raises(ValueError, match="after end"):
            admin.find("Orders", "order-4", begin=10, end=5)
        with pytest.raises(MQClientError, match="no route"):
            admin.find("NoSuchTopic", "order-4")

        master.shutdown()
        # The route now names only the slave, whose index follows its replicated log.
        wait_for(
            lambda: [m.body for m in admin.find("Orders", "order-7")] == [b"order 7"],
            what="order-7 through the slave",
        )
        assert slave.store.find("Orders", sent[3].msg_id, unique=True)[0].body == b"order 3"
        # A master killed without a word stays in the route for a while: its group's slave
        # answers instead (a port nobody listens on stands for the dead master).
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = f"127.0.0.1:{s.getsockname()[1]}"
        answered = admin._ask_group(
            [dead, slave.listen_address], "Orders", "order-9", 64, 0, 2**63 - 1, False
        )
        assert [m.body for m in answered] == [b"order 9"]
        with pytest.raises(MQClientError, match="no broker of the group could be asked"):
            admin._ask_group([dead], "Orders", "order-9", 64, 0, 2**63 - 1, False)
