"""``rocketha admin``: what an operator does with ``mqadmin``, for a user without Java, through
:class:`rocketha.Admin` (topics, clusters, consumer groups and their lag, offsets reset to a
time, a broker's config, messages found by key or msgId). It works against RocketMQ's brokers
too."""

from __future__ import annotations

import argparse
import datetime
import os
from collections.abc import Callable

from rocketha._cli_common import SIGNING_HELP, AddParser, credentials
from rocketha.admin import PERM_READ_WRITE, Admin
from rocketha.config import parse_key_value

#: RocketMQ's default name server, when neither ``--namesrv`` nor ``$NAMESRV_ADDR`` names one.
DEFAULT_NAMESRV = "127.0.0.1:9876"

Action = Callable[[Admin, argparse.Namespace], int]


def add_admin(add: AddParser) -> None:
    """``rocketha admin <object> <action>``'s options."""
    admin = add(
        "admin",
        help="topics, groups and their lag, offsets, broker config, find messages",
        description="Operate a cluster as mqadmin does: rocketha's brokers or RocketMQ's.",
    )
    admin.add_argument(
        "-n",
        "--namesrv",
        default=os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV,
        help="name server host:port, ';' for more (default: $NAMESRV_ADDR, else %(default)s)",
    )
    admin.add_argument("--access-key", metavar="KEY", help=SIGNING_HELP)
    objects = admin.add_subparsers(dest="object", required=True, help="what to operate on")
    _add_topic(objects)
    _add_group(objects)
    cluster = objects.add_parser("cluster", help="the brokers of each cluster")
    cluster.add_argument("action", choices=["list"])
    cluster.set_defaults(func=_run(_cluster_list))
    config = objects.add_parser("config", help="a broker's running config")
    actions = config.add_subparsers(dest="action", required=True)
    get = actions.add_parser("get", help="every key (mqadmin getBrokerConfig)")
    get.add_argument("broker", help="the broker's host:port")
    get.set_defaults(func=_run(_config_get))
    put = actions.add_parser("set", help="change live keys (mqadmin updateBrokerConfig)")
    put.add_argument("broker", help="the broker's host:port")
    put.add_argument("pairs", nargs="+", metavar="KEY=VALUE", help="e.g. brokerPermission=4")
    put.set_defaults(func=_run(_config_set))
    timer = objects.add_parser("timer", help="a broker's timer store: progress and backlog")
    timer.add_argument("broker", help="the broker's host:port")
    timer.set_defaults(func=_run(_timer))
    find = objects.add_parser("find", help="messages by key or by msgId")
    find.add_argument("--topic", required=True)
    which = find.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", help="a key of the messages (KEYS)")
    which.add_argument("--id", help="the msgId a producer got back (UNIQ_KEY)")
    find.set_defaults(func=_run(_find))


def _add_topic(objects: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topic = objects.add_parser("topic", help="create, update, delete, list topics")
    actions = topic.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every topic (mqadmin topicList)").set_defaults(
        func=_run(_topic_list)
    )
    for name, text in [("create", "create a topic"), ("update", "change its queues or perm")]:
        create = actions.add_parser(name, help=f"{text} (mqadmin updateTopic)")
        create.add_argument("topic")
        create.add_argument("--queues", type=int, default=8, help="read and write queues")
        create.add_argument("--perm", type=int, default=PERM_READ_WRITE, help="6 rw, 4 r, 2 w")
        create.add_argument("--order", action="store_true", help="an ordered topic")
        create.add_argument(
            "-a",
            "--attributes",
            type=parse_attributes,
            help="RocketMQ 5 topic attributes as mqadmin takes them: +key=value sets, -key "
            "deletes, comma separated (e.g. +message.type=DELAY)",
        )
        create.add_argument("--cluster", help="its brokers (default: every cluster's masters)")
        create.set_defaults(func=_run(_topic_create))
    delete = actions.add_parser("delete", help="delete a topic (mqadmin deleteTopic)")
    delete.add_argument("topic")
    delete.add_argument("--cluster", help="its brokers (default: every cluster's masters)")
    delete.set_defaults(func=_run(_topic_delete))


def _add_group(objects: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = objects.add_parser("group", help="consumer groups: list, create, delete, lag, reset")
    actions = group.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every subscription group of the masters")
    listing.add_argument("--cluster")
    listing.set_defaults(func=_run(_group_list))
    create = actions.add_parser("create", help="create or update (mqadmin updateSubGroup)")
    create.add_argument("group")
    create.add_argument("--retry-max-times", type=int, default=16)
    create.add_argument("--cluster")
    create.set_defaults(func=_run(_group_create))
    delete = actions.add_parser("delete", help="delete (mqadmin deleteSubGroup)")
    delete.add_argument("group")
    delete.add_argument("--keep-offsets", action="store_true", help="keep its committed offsets")
    delete.add_argument("--cluster")
    delete.set_defaults(func=_run(_group_delete))
    lag = actions.add_parser("lag", help="lag per queue (mqadmin consumerProgress)")
    lag.add_argument("group")
    lag.add_argument("--cluster")
    lag.set_defaults(func=_run(_group_lag))
    reset = actions.add_parser(
        "reset", help="offsets to a time, consumers stopped (mqadmin resetOffsetByTime)"
    )
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    reset.add_argument(
        "--time",
        required=True,
        type=parse_time,
        help="ms since the epoch, or local time as 2026-11-27T09:30:00",
    )
    reset.add_argument("--cluster")
    reset.set_defaults(func=_run(_group_reset))


def parse_attributes(text: str) -> dict[str, str | None]:
    """``updateTopic -a``'s text as :meth:`Admin.create_topic` takes it (None deletes); the
    broker checks the keys and values."""
    changes: dict[str, str | None] = {}
    for change in filter(None, text.split(",")):
        key, equal, value = change[1:].partition("=")
        if change.startswith("+") and key and value:
            changes[key] = value
        elif change.startswith("-") and key and not equal:
            changes[key] = None
        else:
            raise argparse.ArgumentTypeError(f"{change!r}: write +key=value or -key")
    return changes


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, from themselves or from an ISO local time."""
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither milliseconds since the epoch nor a time like 2026-11-27T09:30:00"
        ) from None


def _run(action: Action) -> Callable[[argparse.Namespace], int]:
    """The subcommand's ``func``: ``action`` with an :class:`Admin` on ``--namesrv``."""

    def run(args: argparse.Namespace) -> int:
        with Admin(args.namesrv, credentials=credentials(args)) as admin:
            return action(admin, args)

    return run


def _topic_list(admin: Admin, _args: argparse.Namespace) -> int:
    for topic in admin.topics():
        print(topic)
    return 0


def _topic_create(admin: Admin, args: argparse.Namespace) -> int:
    for addr in admin.create_topic(
        args.topic,
        args.queues,
        cluster=args.cluster,
        perm=args.perm,
        order=args.order,
        attributes=args.attributes,
    ):
        print(f"{args.action} topic {args.topic} to {addr} success.")
    return 0


def _topic_delete(admin: Admin, args: argparse.Namespace) -> int:
    admin.delete_topic(args.topic, cluster=args.cluster)
    print(f"delete topic [{args.topic}] from cluster [{args.cluster or 'every'}] success.")
    return 0


def _cluster_list(admin: Admin, _args: argparse.Namespace) -> int:
    print(f"{'#Cluster Name':<22}{'#Broker Name':<22}{'#BID':<6}#Addr")
    for cluster, brokers in sorted(admin.clusters().items()):
        for name, ids in brokers.items():
            for broker_id, addr in sorted(ids.items()):
                print(f"{cluster:<22}{name:<22}{broker_id:<6}{addr}")
    return 0


def _group_list(admin: Admin, args: argparse.Namespace) -> int:
    for group in admin.groups(args.cluster):
        print(group)
    return 0


def _group_create(admin: Admin, args: argparse.Namespace) -> int:
    for addr in admin.create_group(
        args.group, cluster=args.cluster, retry_max_times=args.retry_max_times
    ):
        print(f"create subscription group {args.group} to {addr} success.")
    return 0


def _group_delete(admin: Admin, args: argparse.Namespace) -> int:
    admin.delete_group(args.group, cluster=args.cluster, clean_offset=not args.keep_offsets)
    print(f"delete subscription group [{args.group}] success.")
    return 0


def _group_lag(admin: Admin, args: argparse.Namespace) -> int:
    progress = admin.consumer_progress(args.group, cluster=args.cluster)
    print(
        f"{'#Topic':<32}{'#Broker Name':<22}{'#QID':<6}{'#Broker Offset':<16}"
        f"{'#Consumer Offset':<18}#Diff"
    )
    for q in progress:
        print(
            f"{q.topic:<32}{q.broker_name:<22}{q.queue_id:<6}{q.broker_offset:<16}"
            f"{q.consumer_offset:<18}{q.lag}"
        )
    print(f"\nDiff Total: {sum(q.lag for q in progress)}")
    return 0


def _group_reset(admin: Admin, args: argparse.Namespace) -> int:
    reset = admin.reset_offset(args.group, args.topic, args.time, cluster=args.cluster)
    print(f"{'#Broker Name':<22}{'#QID':<6}#Offset")
    for (name, queue_id), offset in sorted(reset.items()):
        print(f"{name:<22}{queue_id:<6}{offset}")
    return 0


def _config_get(admin: Admin, args: argparse.Namespace) -> int:
    for key, value in sorted(admin.broker_config(args.broker).items()):
        print(f"{key:<50}= {value}")
    return 0


def _timer(admin: Admin, args: argparse.Namespace) -> int:
    """The timer checkpoint (GET_TIMER_CHECK_POINT) and the waiting timers of each topic
    (GET_TIMER_METRICS), of a rocketha or a RocketMQ 5 broker."""
    for key, value in admin.timer_check_point(args.broker).items():
        print(f"{key:<24}{value}")
    for topic, count in sorted(admin.timer_metrics(args.broker).items()):
        print(f"waiting {topic:<32}{count}")
    return 0


def _config_set(admin: Admin, args: argparse.Namespace) -> int:
    admin.update_broker_config(args.broker, dict(parse_key_value(kv) for kv in args.pairs))
    print(f"update broker config success, {args.broker}")
    return 0


def _find(admin: Admin, args: argparse.Namespace) -> int:
    if args.id is not None:
        found = admin.find_by_id(args.topic, args.id)
        messages = [] if found is None else [found]
    else:
        messages = admin.find(args.topic, args.key)
    for m in messages:
        # The msgId a producer got back is the unique key; the broker's offset id follows.
        print(
            f"{m.properties.get('UNIQ_KEY', m.msg_id)}  {m.topic}/{m.queue_id}#{m.queue_offset}  "
            f"offsetMsgId={m.msg_id}  keys={','.join(m.keys)}  stored {m.store_timestamp}  "
            f"{len(m.body)} B"
        )
    if not messages:
        print("no message found")
        return 1
    return 0


__all__ = ["DEFAULT_NAMESRV", "add_admin", "parse_time"]
