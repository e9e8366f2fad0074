"""A master broker in its own process, under load, for the SIGKILL fault tests.

Prints one JSON line ``{"ha": "127.0.0.1:PORT"}`` once the HA port listens, then one line
``OFFSET SHA256`` per acknowledged (PUT_OK) message, flushed at once: whatever the test has read
when it kills this process is exactly what a client was told is safe. Reads commands on stdin:
``stop`` ends the load and prints ``{"max_offset": N}``; the broker keeps serving its slaves
until SIGTERM (a clean stop, exit 0) or SIGKILL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import threading

from rocketha import Broker, BrokerConfig, Message, PutStatus


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--role", default="SYNC_MASTER")
    parser.add_argument("--segment", type=int, default=64 * 1024)
    parser.add_argument("-t", "--threads", type=int, default=4)
    parser.add_argument("--heartbeat", type=int, default=200)
    parser.add_argument("--housekeeping", type=int, default=1000)
    args = parser.parse_args()

    config = BrokerConfig(
        broker_role=args.role,
        store_path_root_dir=args.store,
        mapped_file_size_commit_log=args.segment,
        ha_listen_address="127.0.0.1",
        ha_listen_port=0,
        listen_port=0,
        ha_send_heartbeat_interval=args.heartbeat,
        ha_housekeeping_interval=args.housekeeping,
        slave_timeout=1000,
    )
    stop = threading.Event()
    done = threading.Event()
    # One line is one write: a kill never leaves an ack half-reported by another thread.
    out = threading.Lock()

    def emit(line: str) -> None:
        with out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with Broker(config) as broker:
        emit(json.dumps({"ha": broker.ha_address}))

        def produce(worker: int) -> None:
            n = 0
            while not stop.is_set():
                # Unique bodies of varied size, some larger than a transfer batch.
                size = 40_000 if n % 97 == 0 else 16 + (n * 131) % 900
                body = f"{worker}:{n}:".encode() + os.urandom(size)
                n += 1
                r = broker.put(Message(f"T{worker % 3}", body, queue_id=worker % 4))
                if r.status is PutStatus.PUT_OK:
                    emit(f"{r.offset} {hashlib.sha256(body).hexdigest()}")

        workers = [threading.Thread(target=produce, args=(w,)) for w in range(args.threads)]
        for w in workers:
            w.start()

        def commands() -> None:
            for line in sys.stdin:
                if line.strip() == "stop":
                    stop.set()
                    for w in workers:
                        w.join()
                    emit(json.dumps({"max_offset": broker.max_offset}))

        threading.Thread(target=commands, daemon=True).start()
        # Timed waits: SIGTERM may land on a Rust thread, and the Python handler runs only
        # when the main thread next executes bytecode.
        while not done.wait(0.5):
            pass
        stop.set()
        for w in workers:
            w.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
