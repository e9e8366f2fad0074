"""``rocketha demo --failover`` runs as a user types it: Apache RocketMQ 5.4.0's controller (three
JVMs), three rocketha brokers in controller mode, the master SIGKILLed under SYNC sends, a new
master from the SyncStateSet, no acknowledged message lost, the old master back as a slave.
Run: ``pytest -m interop``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from rocketha import _children

pytestmark = pytest.mark.interop


def test_demo_failover_loses_nothing_and_the_old_master_rejoins(tmp_path: Path) -> None:
    out = _children.run(
        [sys.executable, "-m", "rocketha", "demo", "--failover", "-n", "400", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert summary["new_master_was_in_sync_state_set"] is True
    assert summary["new_master_broker_id"] != summary["killed_master_broker_id"]
    assert summary["acked"] >= 400 and summary["lost"] == 0
    # Every member holds every acknowledged message: the SyncStateSet is the whole group again.
    assert summary["acked_held_by"] == dict.fromkeys(("b0", "b1", "b2"), summary["acked"])
    assert summary["old_master_restarted_as"] == "SLAVE"
    assert len(summary["sync_state_set_after"]) == 3
    assert summary["seconds_to_new_master"] >= 0
    assert summary["seconds_to_first_send_on_new_master"] >= 0
    # The run's directory (stores, logs, the controllers' homes) is gone.
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*")] == [Path("rocketha-runs")]
