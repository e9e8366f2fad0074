"""Fault injection: SIGKILLs, a TCP fault proxy, hostile HA peers, a full disk, consumers across
failures.

Every test in this directory is marked ``faults``. The default run is short enough for CI;
``pytest tests/faults --long`` runs the trial counts of issues 7 and 15. The session ends with a
table of what the trials found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
# The client processes of the consumer scenarios live with the benchmark harness (benches/).
if str(HERE.parents[1]) not in sys.path:
    sys.path.insert(0, str(HERE.parents[1]))

from common import FaultReport  # noqa: E402

REPORT_KEY = pytest.StashKey[FaultReport]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long", action="store_true", help="fault tests: run the long trial counts (minutes)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[REPORT_KEY] = FaultReport()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.faults)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.trials(SHORT, LONG)``: one test per trial, each with its own timeout, for
    trials too long to run LONG of them in one test."""
    marker = metafunc.definition.get_closest_marker("trials")
    if marker is not None:
        short, long = marker.args
        count = long if metafunc.config.getoption("--long", default=False) else short
        metafunc.parametrize("trial", range(count))


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--long", default=False))


@pytest.fixture
def fault_report(request: pytest.FixtureRequest) -> FaultReport:
    return request.config.stash[REPORT_KEY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    rows = terminalreporter.config.stash[REPORT_KEY].rows
    if not rows:
        return
    header = ("scenario", "trials", "acked", "acked-lost", "redelivered", "corrupt", "converged")
    header += ("errors",)
    table = [header] + [
        (
            name,
            *(str(n) for n in (s.trials, s.acked, s.acked_lost, s.redelivered, s.corrupt)),
            *(str(n) for n in (s.converged, s.errors)),
        )
        for name, s in sorted(rows.items())
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    terminalreporter.write_sep("=", "fault injection summary")
    for i, row in enumerate(table):
        numbers = zip(row[1:], widths[1:], strict=True)
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in numbers]
        terminalreporter.write_line("  ".join(cells))
        if i == 0:
            terminalreporter.write_line("  ".join("-" * w for w in widths))
