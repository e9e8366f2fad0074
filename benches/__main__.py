"""``python -m benches [SCENARIO ...] [--quick] [--runs N] [--out DIR]``: runs the scenarios,
prints a table and writes ``results.json``."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from benches.common import Figure, print_table, write_results

SCENARIOS = {
    "append": "benches.append",
    "replicate": "benches.replicate",
    "sync-put": "benches.sync_put",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benches", description=__doc__)
    parser.add_argument("scenarios", nargs="*", choices=[*SCENARIOS, []], default=[])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    parser.add_argument("--runs", type=int, default=None, help="repetitions (default 5; quick 3)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    figures: list[Figure] = []
    for name in args.scenarios or list(SCENARIOS):
        module = importlib.import_module(SCENARIOS[name])
        print(f"== {name}", flush=True)
        figs = module.run(args.quick, runs)
        print_table(figs)
        figures += figs
    print("\n== all")
    print_table(figures)
    print(f"\nwrote {write_results(args.out, figures, {})}")


if __name__ == "__main__":
    main()
