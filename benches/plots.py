"""PNG plots of a run: throughput beside its baselines, latency CDFs, slave lag over time, the
soak's latency, memory and descriptors over time."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: benchmarks run headless, in CI too

import matplotlib.pyplot as plt

from benches.common import Figure


def _throughput(figures: list[Figure], path: Path) -> None:
    figs = [f for f in figures if f.higher_is_better and f.baseline]
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(figs) + 1.5))
    y = range(len(figs))
    ax.barh(
        [i + 0.2 for i in y],
        [f.median for f in figs],
        0.4,
        label="rocketha",
        xerr=[f.spread for f in figs],
    )
    ax.barh([i - 0.2 for i in y], [f.baseline or 0 for f in figs], 0.4, label="baseline")
    ax.set_yticks(
        list(y),
        [f"{f.scenario}: {f.name} [{f.unit}]\nvs {f.baseline_name}" for f in figs],
        fontsize=7,
    )
    # Units differ by orders of magnitude (MB/s, puts/s): a log axis keeps every pair legible.
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.legend()
    ax.set_title("Throughput: median of the runs (bars) beside its same-run baseline")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _latency_cdfs(figures: list[Figure], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 5))
    for f in figures:
        for key, label in (("latency_us", "rocketha"), ("baseline_latency_us", f.baseline_name)):
            values = f.series.get(key)
            if values:
                qs = [i / (len(values) - 1) for i in range(len(values))]
                ax.plot(values, qs, label=f"{f.scenario}: {f.name.split(' p50')[0]} ({label})")
    ax.set_xscale("log")
    ax.set_xlabel("latency (us)")
    ax.set_ylabel("fraction of puts")
    ax.set_title("Put latency CDFs (one run)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _lag(f: Figure, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(f.series["t_s"], [b / 1024 for b in f.series["lag_bytes"]], lw=0.8)
    ax.set_xlabel("time under load (s)")
    ax.set_ylabel("slave lag (KiB)")
    ms = ax.twinx()
    ms.plot(f.series["t_s"], f.series["lag_ms"], lw=0.8, color="tab:orange", alpha=0.6)
    ms.set_ylabel("slave lag (ms, estimated from the put rate)", color="tab:orange")
    ax.set_title("ASYNC_MASTER slave lag under sustained puts, sampled every 100 ms")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _soak(f: Figure, path: Path) -> None:
    t = f.series["t_s"]
    fig, (lat, mem, fds) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for q in ("p50", "p99"):
        lat.plot(t, f.series[f"{q}_ms"], lw=0.8, label=f"send {q}")
    lat.set_ylabel("send latency (ms)")
    lat.set_yscale("log")
    lat.legend(fontsize=7)
    for name in ("master", "slave"):
        mem.plot(t, f.series[f"{name}_rss_mib"], lw=0.8, label=f"{name} RSS")
        mem.plot(t, f.series[f"{name}_anon_mib"], lw=0.8, ls="--", label=f"{name} anonymous RSS")
        fds.plot(t, f.series[f"{name}_fds"], lw=0.8, label=f"{name} open fds")
    mem.set_ylabel("MiB")
    mem.legend(fontsize=7)
    lag = fds.twinx()
    lag.plot(t, f.series["lag_msgs"], lw=0.6, color="tab:gray", alpha=0.6)
    lag.set_ylabel("consumer lag (messages)", color="tab:gray")
    fds.set_ylabel("open fds")
    fds.set_xlabel("time under load (s)")
    fds.legend(fontsize=7, loc="upper left")
    lat.set_title("Soak: SYNC_MASTER + SLAVE at half the peak, sampled every second")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(out: Path, figures: list[Figure]) -> list[Path]:
    """Writes the plots the figures have data for; returns their paths."""
    written = []
    if any(f.higher_is_better and f.baseline for f in figures):
        written.append(out / "throughput.png")
        _throughput(figures, written[-1])
    if any("latency_us" in f.series for f in figures):
        written.append(out / "latency_cdf.png")
        _latency_cdfs(figures, written[-1])
    for f in figures:
        if "lag_bytes" in f.series:
            written.append(out / "lag.png")
            _lag(f, written[-1])
        if "p99_ms" in f.series:
            written.append(out / "soak.png")
            _soak(f, written[-1])
    return written
