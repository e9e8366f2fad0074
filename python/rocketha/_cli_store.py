"""``rocketha inspect`` and ``rocketha repair``: a store directory read, verified and repaired
offline, with what recovery and replication refuse to decide alone decided explicitly."""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

from rocketha._cli_common import AddParser
from rocketha.exceptions import RocketHAError
from rocketha.store import MessageStore


def add_inspect(add: AddParser) -> None:
    """``rocketha inspect``'s options: the store, and how to read it."""
    inspect = add("inspect", help="list segments and records, verify CRCs")
    inspect.add_argument("store", help="the store directory (storePathRootDir)")
    inspect.add_argument("--records", action="store_true", help="print every record")
    inspect.add_argument(
        "--accept-zero-body-crc",
        action="store_true",
        help="take a BODYCRC of 0 as never computed (haAcceptZeroBodyCrc)",
    )
    inspect.set_defaults(func=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    """Lists segments and records, verifying every CRC."""
    with MessageStore(
        args.store,
        read_only=True,
        ha_accept_zero_body_crc=args.accept_zero_body_crc,
    ) as store:
        print(f"store {args.store}: offsets [{store.min_offset}, {store.max_offset})")
        for path, start, used in store.segments():
            print(f"  segment {Path(path).name}  start {start}  used {used}")
        corruption = store.corruption()
        if corruption is not None:
            print(f"CORRUPT: {corruption[4]}")
            return 1
        count, topics = 0, dict[str, int]()
        try:
            for m in store.messages(check_crc=True):
                count += 1
                topics[m.topic] = topics.get(m.topic, 0) + 1
                if args.records:
                    print(
                        f"  @{m.commitlog_offset} {m.topic}/{m.queue_id}#{m.queue_offset} "
                        f"{len(m.body)} B tags={m.tags} msgId={m.msg_id}"
                    )
        except RocketHAError as e:
            print(f"CORRUPT: {e}")
            return 1
        scan_error = store.scan_error()
        if scan_error is not None:
            at, reason = scan_error
            print(
                f"CORRUPT: valid data ends at offset {at}: {reason} "
                "(a torn last record is expected while a broker is writing)"
            )
            return 1
        print(f"{count} records, every CRC verified; per topic: {topics}")
        for topic, qid, lo, hi in store.queues():
            print(f"  consume queue {topic}/{qid}: queue offsets [{lo}, {hi})")
    return 0


def add_repair(add: AddParser) -> None:
    """``rocketha repair``'s options: the store and the one repair to make."""
    repair = add("repair", help="repair a divergent replica or mid-log corruption, explicitly")
    repair.add_argument("store", help="the store directory (storePathRootDir)")
    action = repair.add_mutually_exclusive_group()
    action.add_argument(
        "--truncate-to-common-prefix",
        action="store_true",
        help="divergent replica: cut the log back to the last record both logs share",
    )
    action.add_argument(
        "--truncate-at-corruption",
        action="store_true",
        help="mid-log corruption: cut the log at the invalid record, dropping what follows",
    )
    action.add_argument(
        "--accept-zero-body-crc",
        action="store_true",
        help="mid-log corruption that is only BODYCRC 0: keep the records, rewrite nothing "
        "(then set haAcceptZeroBodyCrc=true)",
    )
    repair.add_argument("--master-store", help="compare with this copy of the master's store")
    repair.add_argument("--to", type=int, help="the offset where the logs part, if known")
    repair.set_defaults(func=cmd_repair)


def _divergence_offset(args: argparse.Namespace) -> int:
    """Where the logs part: given, found by comparing with the master's store, or recorded by
    the HA client when it detected the divergence."""
    if args.to is not None:
        return int(args.to)
    if args.master_store:
        with (
            MessageStore(args.store, read_only=True) as mine,
            MessageStore(args.master_store, read_only=True) as theirs,
        ):
            offset = max(mine.min_offset, theirs.min_offset)
            end = min(mine.max_offset, theirs.max_offset)
            while offset < end:
                a, b = mine.read_raw(offset, 1 << 20), theirs.read_raw(offset, 1 << 20)
                n = min(len(a), len(b))
                if n == 0:
                    break
                if a[:n] != b[:n]:
                    return offset + next(i for i in range(n) if a[i] != b[i])
                offset += n
            return offset
    marker = Path(args.store) / "divergence"
    if not marker.exists():
        raise RocketHAError(
            f"{marker} not found: no divergence was recorded; "
            "pass --master-store DIR or --to OFFSET"
        )
    fields = dict(line.split("=", 1) for line in marker.read_text().split())
    return int(fields["offset"])


def _truncate_at_corruption(args: argparse.Namespace) -> int:
    """Cuts the log at the invalid record in its middle, dropping the valid records after it:
    what recovery refuses to do unless told."""
    with MessageStore(args.store, truncate_at_corruption=True) as store:
        cut = store.corruption()
        deleted = store.recovery_report()[7]
        end = store.max_offset
    if cut is None:
        print(f"{args.store}: no corruption in the middle of the log; nothing cut")
        return 0
    at, _next_valid, records, size, _message = cut
    print(
        f"cut {args.store} at offset {at}: dropped {records} valid records ({size} bytes) that "
        f"followed the invalid one, deleted {len(deleted)} segment files; the log ends at {end}"
    )
    return 0


def _accept_zero_body_crc(args: argparse.Namespace) -> int:
    """Checks that the store opens when a BODYCRC of 0 is taken as "never computed"; rewrites
    nothing, so the records stay byte for byte what their writer sent."""
    with MessageStore(args.store, ha_accept_zero_body_crc=True) as store:
        zero = sum(
            1 for m in store.messages() if m.body_crc == 0 and zlib.crc32(m.body) & 0x7FFFFFFF != 0
        )
    print(
        f"{args.store} opens with a BODYCRC of 0 accepted: {zero} records keep BODYCRC 0, nothing "
        "rewritten. Set haAcceptZeroBodyCrc=true in the broker.conf of every broker that opens "
        "or replicates this log; every other check stays on"
    )
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    """Repairs what recovery and replication refuse to decide alone: a divergent replica
    (truncated to the last record both logs share), or corruption in the middle of the log (cut
    there, or kept when its only problem is a BODYCRC of 0)."""
    if args.truncate_at_corruption:
        return _truncate_at_corruption(args)
    if args.accept_zero_body_crc:
        return _accept_zero_body_crc(args)
    if not args.truncate_to_common_prefix:
        print(
            "rocketha repair: say what to do: --truncate-to-common-prefix, "
            "--truncate-at-corruption or --accept-zero-body-crc",
            file=sys.stderr,
        )
        return 2
    diverges_at = _divergence_offset(args)
    with MessageStore(args.store) as store:
        boundary = store.min_offset
        for m in store.messages():
            if m.next_offset > diverges_at:
                break
            boundary = m.next_offset
        dropped = store.max_offset - boundary
        deleted = store.truncate_to(boundary)
    (Path(args.store) / "divergence").unlink(missing_ok=True)
    print(
        f"truncated {args.store} to offset {boundary} (logs part at {diverges_at}): "
        f"dropped {dropped} bytes, deleted {len(deleted)} segment files"
    )
    return 0


__all__ = ["add_inspect", "add_repair", "cmd_inspect", "cmd_repair"]
