"""What ``kmirror bench mirror`` prints and draws: the results table, the ratios, the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .stats import BASELINE, ModeResult, Ratio

__all__ = ["size_label", "results_table", "ratios_table", "plot", "PlotUnavailableError"]


class PlotUnavailableError(RuntimeError):
    """``--plot`` without matplotlib installed."""


def size_label(record_bytes: int) -> str:
    """100 -> "100 B", 1024 -> "1 KiB", 10240 -> "10 KiB"."""
    if record_bytes >= 1024 and record_bytes % 1024 == 0:
        return f"{record_bytes // 1024} KiB"
    return f"{record_bytes} B"


def results_table(results: Sequence[ModeResult]) -> str:
    """One line per mode and scenario, medians."""
    lines = [f"{'codec':<7}{'record':>7}  {'mode':<19}{'MB/s':>8}{'wire MB/s':>11}{'records/s':>12}"
             f"{'CPU s/GB':>10}{'peak RSS MB':>13}"]
    for r in results:
        lines.append(f"{r.codec:<7}{size_label(r.record_bytes):>7}  {r.mode:<19}{r.mb_per_s:>8.1f}{r.wire_mb_per_s:>11.1f}"
                     f"{r.records_per_s:>12,.0f}{r.cpu_s_per_gb:>10.1f}{r.peak_rss_mb:>13.0f}")
    return "\n".join(lines)


def _verdict(met: bool | None) -> str:
    return "" if met is None else ("meets" if met else "MISSES")


def ratios_table(ratios: Sequence[Ratio]) -> str:
    """``pass-through vs X``: MB/s ratio and CPU-per-GB ratio, with the target where there is one."""
    lines = [f"{'codec':<7}{'record':>7}  {BASELINE + ' vs':<22}{'MB/s ratio':>11}{'CPU/GB ratio':>14}  target"]
    for r in ratios:
        target = ""
        if r.target is not None:
            target = f">= {r.target.throughput:g}x MB/s" + (f", <= 1/{r.target.cpu:g} CPU/GB" if r.target.cpu else "")
            target += f"  {_verdict(r.met)}"
        lines.append(f"{r.codec:<7}{size_label(r.record_bytes):>7}  {r.versus:<22}{r.throughput:>10.2f}x"
                     f"{'1/' + format(r.cpu, '.1f'):>14}  {target}".rstrip())
    return "\n".join(lines)


def plot(results: Sequence[ModeResult], path: Path | str) -> None:
    """Bar chart: MB/s by codec, one bar per mode, one panel per record size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailableError("--plot needs matplotlib: pip install 'kmirror[bench]'") from exc
    sizes = sorted({r.record_bytes for r in results})
    codecs = list(dict.fromkeys(r.codec for r in results))
    modes = list(dict.fromkeys(r.mode for r in results))
    by_key = {(r.record_bytes, r.codec, r.mode): r.mb_per_s for r in results}
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 + 4 * len(sizes), 4.5), squeeze=False, sharey=True)
    width = 0.8 / len(modes)
    for ax, size in zip(axes[0], sizes):
        for i, mode in enumerate(modes):
            xs = [c + (i - (len(modes) - 1) / 2) * width for c in range(len(codecs))]
            ax.bar(xs, [by_key.get((size, codec, mode), 0.0) for codec in codecs], width, label=mode)
        ax.set_title(f"{size_label(size)} records")
        ax.set_xticks(range(len(codecs)), codecs)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("MB/s of record data (median)")
    axes[0][-1].legend(fontsize="small")
    fig.suptitle("kmirror bench mirror: throughput by mode and codec")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
