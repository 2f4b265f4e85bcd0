"""What ``kmirror bench mirror`` prints and draws: the results table, the targets table, the plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from .stats import (BASELINE, RUN_COPY_TARGET, TARGET_SCENARIOS, TARGETS, Measure, ModeResult, PeerRatio, Ratio,
                    RunCopyRatio, Scenario, SmallBatchRatio, Target)

__all__ = ["size_label", "scenario_label", "results_table", "ratios_table", "run_copy_table", "small_batch_table", "plot",
           "PlotUnavailableError"]


class PlotUnavailableError(RuntimeError):
    """``--plot`` without matplotlib installed."""


def size_label(size: int) -> str:
    """100 -> "100 B", 1024 -> "1 KiB", 10240 -> "10 KiB", 1048576 -> "1 MiB"."""
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def scenario_label(scenario: Scenario) -> str:
    """"lz4, 1 KiB records, 16 KiB batches": what the progress lines and the plot panels name."""
    return f"{scenario.codec}, {size_label(scenario.record_bytes)} records, {size_label(scenario.batch_bytes)} batches"


def _scenario_columns(scenario: Scenario) -> str:
    return f"{scenario.codec:<7}{size_label(scenario.record_bytes):>7}{size_label(scenario.batch_bytes):>9}"


_SCENARIO_HEADER = f"{'codec':<7}{'record':>7}{'batch':>9}"


def results_table(results: Sequence[ModeResult]) -> str:
    """One line per mode and scenario, medians. ``stored`` is the mean source batch as stored,
    measured: what ``batch`` asked for, as it came out."""
    lines = [f"{_SCENARIO_HEADER}{'stored':>12}  {'mode':<19}{'MB/s':>8}{'wire MB/s':>11}{'batches/s':>11}"
             f"{'records/s':>12}{'CPU s/GB':>10}{'peak RSS MB':>13}"]
    for r in results:
        lines.append(f"{_scenario_columns(r.scenario)}{r.mean_batch_bytes / 1024:>8.1f} KiB  {r.mode:<19}"
                     f"{r.mb_per_s:>8.1f}{r.wire_mb_per_s:>11.1f}{r.batches_per_s:>11,.0f}{r.records_per_s:>12,.0f}"
                     f"{r.cpu_s_per_gb:>10.1f}{r.peak_rss_mb:>13.0f}")
    return "\n".join(lines)


def _target_header(target: Target) -> str:
    return f"{BASELINE}/{target.versus} {target.measure.value}"


def _target_cell(target: Target, ratio: Ratio | None) -> str:
    """"0.95x (>= 0.9x) met", or "-" when the scenario did not run the other mode."""
    if ratio is None:
        return "-"
    relation = ">=" if target.measure is Measure.THROUGHPUT else "<="
    verdict = "met" if target.met(ratio) else "MISSED"
    return f"{target.value(ratio):.2f}x ({relation} {target.bound:g}x) {verdict}"


def ratios_table(ratios: Sequence[Ratio]) -> str:
    """One line per scenario, one column per target, each value beside its bound and verdict.

    ``MB/s`` columns are pass-through's MB/s over the other mode's; the ``CPU s/GB`` column is
    pass-through's CPU per GB as a fraction of the other's (0.2x: a fifth). Rows marked ``*``
    are the scenarios the targets are set for, and the last line counts them.
    """
    by_scenario: dict[Scenario, dict[str, Ratio]] = {}
    for ratio in ratios:
        by_scenario.setdefault(ratio.scenario, {})[ratio.versus] = ratio
    widths = [max(len(_target_header(t)), 26) + 2 for t in TARGETS]
    lines = [_SCENARIO_HEADER + "  " + "".join(f"{_target_header(t):<{w}}" for t, w in zip(TARGETS, widths)).rstrip()]
    verdicts = []
    for scenario, versus in by_scenario.items():
        mark = "*" if scenario in TARGET_SCENARIOS else " "
        cells = [_target_cell(t, versus.get(t.versus)) for t in TARGETS]
        lines.append(_scenario_columns(scenario) + mark + " " + "".join(f"{c:<{w}}" for c, w in zip(cells, widths)).rstrip())
        if scenario in TARGET_SCENARIOS:
            verdicts += [t.met(versus[t.versus]) for t in TARGETS if t.versus in versus]
    scope = "; ".join(f"{scenario_label(s)}, {s.partitions} partitions" for s in sorted(TARGET_SCENARIOS, key=scenario_label))
    met = f"met there: {sum(verdicts)} of {len(verdicts)}" if verdicts else "none of these scenarios ran"
    lines += [f"* the targets are set for: {scope}", f"  {met} (other rows are held to the same bounds, for comparison)"]
    return "\n".join(lines)


def run_copy_table(ratios: Sequence[RunCopyRatio]) -> str:
    """One line per scenario: ``kmirror run``'s copy rate over pass-through's, beside issue 9's
    bound, and the whole query's rate over pass-through's (what start-up and per-trigger costs leave)."""
    lines = [f"{_SCENARIO_HEADER}  {'run copying/pass-through MB/s':<38}run query/pass-through MB/s"]
    for r in ratios:
        verdict = "met" if r.met else "MISSED"
        lines.append(f"{_scenario_columns(r.scenario)}  {f'{r.copy:.2f}x (>= {RUN_COPY_TARGET:g}x) {verdict}':<38}"
                     f"{r.query:.2f}x")
    return "\n".join(lines)


def small_batch_table(ratios: Sequence[SmallBatchRatio]) -> str:
    """One line per scenario: the coalesced copy's MB/s and CPU s/GB against the confluent-kafka
    loop's, its MB/s against pass-through's, and issue 40's bounds where it sets them."""
    lines = [f"{_SCENARIO_HEADER}  {'MB/s vs loop':<14}{'CPU s/GB vs loop':<18}{'MB/s vs pass-through':<22}target"]
    for r in ratios:
        versus_base = "-" if r.over_pass_through is None else f"{r.over_pass_through:.2f}x"
        target = _target(r)
        lines.append(f"{_scenario_columns(r.scenario)}  {f'{r.throughput:.2f}x':<14}{f'{r.cpu:.2f}x':<18}"
                     f"{versus_base:<22}{target}")
    return "\n".join(lines)


def peer_table(ratios: Sequence[PeerRatio]) -> str:
    """One line per scenario and guarantee: ``kmirror run``'s MB/s and CPU s/GB against
    MirrorMaker 2's, and issue 35's bounds where it sets them."""
    lines = [f"{_SCENARIO_HEADER}  {'kmirror':<17}{'versus':<18}{'MB/s':<8}{'CPU s/GB':<10}target"]
    for r in ratios:
        lines.append(f"{_scenario_columns(r.scenario)}  {r.ours:<17}{r.peer:<18}{f'{r.throughput:.2f}x':<8}"
                     f"{f'{r.cpu:.2f}x':<10}{_target(r)}")
    return "\n".join(lines)


def _target(ratio: SmallBatchRatio | PeerRatio) -> str:
    """The bounds a ratio is held to and whether it met them, or "-" where none apply."""
    if ratio.bounds is None:
        return "-"
    throughput, cpu = ratio.bounds
    return f">= {throughput:g}x" + ("" if cpu is None else f", <= {cpu:g}x CPU") + (" met" if ratio.met else " MISSED")


def plot(results: Sequence[ModeResult], path: Path | str) -> None:
    """Bar chart: MB/s by codec, one bar per mode, one panel per record size and batch size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailableError("--plot needs matplotlib: pip install 'kmirror[bench]'") from exc
    panels = sorted({(r.scenario.record_bytes, r.scenario.batch_bytes) for r in results})
    codecs = list(dict.fromkeys(r.scenario.codec for r in results))
    modes = list(dict.fromkeys(r.mode for r in results))
    by_key = {(r.scenario.record_bytes, r.scenario.batch_bytes, r.scenario.codec, r.mode): r.mb_per_s for r in results}
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(1 + 5 * columns, 4.2 * rows), squeeze=False, sharey=True)
    width = 0.8 / len(modes)
    for ax, (size, batch) in zip(axes.flat, panels):
        for i, mode in enumerate(modes):
            xs = [c + (i - (len(modes) - 1) / 2) * width for c in range(len(codecs))]
            ax.bar(xs, [by_key.get((size, batch, codec, mode), 0.0) for codec in codecs], width, label=mode)
        ax.set_title(f"{size_label(size)} records, {size_label(batch)} batches")
        ax.set_xticks(range(len(codecs)), codecs)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("MB/s of record data (median)")
    axes.flat[len(panels) - 1].legend(fontsize="small")
    fig.suptitle("kmirror bench mirror: throughput by mode, codec, record size and source batch size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
