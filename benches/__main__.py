"""``python -m benches [SCENARIO ...] [--quick] [--runs N] [--out DIR]`` (or ``rocketha bench``):
runs the scenarios, prints a table and writes ``results.json`` and PNG plots. ``soak`` runs
only when named (``--duration``, ``--rate``): it takes ten minutes; so does ``failover``, whose
trials each restart a broker."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rocketha import _children
from tqdm import tqdm

from benches.common import SKIPPED_FIGURES, Figure, Skipped, print_table, write_results

SCENARIOS = {
    "append": "benches.append",
    "replicate": "benches.replicate",
    "sync-put": "benches.sync_put",
    "peer-redis": "benches.peer_redis",
    "seed-python": "benches.seed_python",
    "spark-ingest": "benches.spark_ingest",
    "table-tier": "benches.table_tier",
    "lag": "benches.lag",
    "remoting": "benches.remoting",
    "consume": "benches.consume",
    "hostile": "benches.hostile",
    "retry": "benches.retry",
    "index": "benches.index",
    "sql-filter": "benches.sql_filter",
    "transaction": "benches.transaction",
    "failover": "benches.failover",
    "peers": "benches.peers_bench",
    "soak": "benches.soak",
    "scale": "benches.scale",
    "timer": "benches.timer",
}
#: Run only when named: the soak is long by design, a failover trial restarts a broker, the
#: scale run creates tens of thousands of topics on RocketMQ too, the timer run waits for
#: its timers to fall due on both brokers (minutes even with --quick).
ON_REQUEST = {"soak", "failover", "scale", "timer"}


def _run_scenario(name: str, quick: bool, runs: int, soak: dict[str, float | None]) -> list[Figure]:
    try:
        module = importlib.import_module(SCENARIOS[name])
    except ModuleNotFoundError as e:
        # spark-ingest needs PySpark, which the core package does not.
        raise Skipped(f"needs the {e.name} package: pip install '.[spark]'") from None
    if name == "soak":
        return module.run(quick, runs, **soak)
    return module.run(quick, runs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches", description=__doc__)
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=", ".join(SCENARIOS))
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    parser.add_argument("--runs", type=int, default=None, help="repetitions (default 5; quick 3)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--duration", type=float, help="soak: seconds under load (default 600; quick 30)"
    )
    parser.add_argument(
        "--rate", type=float, help="soak: acked sends/s in all (default half the measured peak)"
    )
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    runs = args.runs or (3 if args.quick else 5)
    figures: list[Figure] = []
    skipped: dict[str, str] = {}
    failed = False
    names = args.scenarios or [s for s in SCENARIOS if s not in ON_REQUEST]
    soak = {"duration": args.duration, "rate": args.rate}
    # disable=None: a bar on a terminal, plain lines in CI logs.
    with tqdm(names, desc="bench", unit="scenario", file=sys.stderr, disable=None) as bar:
        for name in bar:
            bar.set_postfix_str(name)
            started = time.perf_counter()
            try:
                figs = _run_scenario(name, args.quick, runs, soak)
            except Skipped as e:
                skipped[name] = str(e)
                bar.write(f"== {name}: skipped: {e}")
                continue
            except Exception as e:
                # One broken scenario must not throw away the others' results; the exit code
                # still says something failed.
                skipped[name] = f"failed: {type(e).__name__}: {e}"
                failed = True
                bar.write(f"== {name}: FAILED: {type(e).__name__}: {e}")
                continue
            with tqdm.external_write_mode(file=sys.stdout):
                print(f"== {name} ({time.perf_counter() - started:.0f} s)")
                print_table(figs)
            figures += figs
    skipped.update(SKIPPED_FIGURES)
    print("\n== all")
    print_table(figures)
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    print(f"\nwrote {write_results(args.out, figures, skipped)}")
    try:
        from benches.plots import write_plots
    except ImportError as e:
        print(f"no plots: {e} (pip install '.[bench]')")
    else:
        for path in write_plots(args.out, figures):
            print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    # SIGTERM (`timeout`, a CI runner) unwinds like Ctrl-C: every scenario's `with` blocks stop
    # its brokers and JVMs and remove its temp dirs before the harness exits 128 + signal.
    _children.on_stop_signals()
    try:
        sys.exit(main())
    except _children.StopSignal as e:
        print(f"\nbench: {e}", file=sys.stderr)
        sys.exit(128 + e.signum)
