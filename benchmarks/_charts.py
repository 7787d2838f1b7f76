"""Draws the comparison's charts: one PNG per workload, a bar per contender.

Used by ``benchmarks/compare.py`` and ``benchmarks/dask_bench.py``.
matplotlib (in the ``bench`` extra) is imported only here, so the
benchmarks themselves run without it. Each bar is semidbm's speed over a
contender's, drawn from 1x (equal speed, a dashed line in the middle of
the axis) to its ratio on a logarithmic axis, so that 2x faster and 2x
slower are bars of one length on either side, and a 40,000x gap is
still told from a 20x one: faster to the right, slower to the left. The
axis has labelled ticks ("10x faster", "2x slower"), the colour of a bar
says which side it ends on (the legend names both), each bar is labelled
with its figure ("36.2x faster"), and the contenders that have no bar
are named under the axis, each with its reason.
"""

import math
import textwrap

#: Bar colours: semidbm faster than the contender, or slower.
FASTER = "#2f9e44"
SLOWER = "#e8590c"

#: The colour of the line at a ratio of 1 (equal speed).
EVEN = "#495057"

#: The axis runs from 1x out to the first tick at or past the largest gap,
#: then this much further (a share of that side's decades), for the labels.
LABEL_ROOM = 0.4

#: The ticks within a decade, by how many decades a side spans at most:
#: 1x, 2x, 5x, 10x on one decade; 1x, 3x, 10x... on two; powers of ten past.
TICK_STEPS = [(1, (1, 2, 5)), (2, (1, 3))]

#: Past two decades, at most this many ticks beyond 1x on a side: every
#: power of ten up to 1,000x, then every other one (1x, 100x, 10,000x...).
MOST_DECADE_TICKS = 3

#: The widest line of the note that names what is left out, in characters.
NOTE_WIDTH = 90


def ticks(extent):
    """The ratios at or above 1 that get a tick on an axis reaching ``extent``.

    As TICK_STEPS has them for that many decades, past them powers of
    ten (MOST_DECADE_TICKS), so that the labels do not crowd; the last
    one is the first at or past ``extent``.
    """
    decades = math.log10(extent)
    steps = next((steps for most, steps in TICK_STEPS if decades <= most), None)
    if steps is None:
        stride = math.ceil(decades / MOST_DECADE_TICKS)
        count = math.ceil(decades / stride)
        return [10 ** (stride * number) for number in range(count + 1)]
    found = []
    decade = 1
    while True:
        for step in steps:
            found.append(step * decade)
            if found[-1] >= extent:
                return found
        decade *= 10


def tick_label(ratio):
    """The label of the tick at ``ratio``: "1x" in the middle, "10x faster", "10x slower"."""
    if ratio == 1:
        return "1x\nequal"
    if ratio > 1:
        return "{:,}x\nfaster".format(ratio)
    return "{:,}x\nslower".format(round(1 / ratio))


def ratio_chart(path, title, bars, axis_label, label, left_out=()):
    """Write a horizontal bar chart of ``bars`` (``(contender, ratio)`` pairs) to ``path``.

    A ratio is semidbm's speed over the contender's: above 1, semidbm is
    faster. ``axis_label`` names the ratio and its unit; ``label(ratio)``
    is the text beside a bar. ``left_out`` lists ``(contender, why)``
    for those without a bar, named under the axis.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    names = [name for name, _ in bars]
    ratios = [ratio for _, ratio in bars]
    widest = max(max(ratio, 1 / ratio) for ratio in ratios)
    marks = ticks(max(widest, 2))
    reach = marks[-1] ** (1 + LABEL_ROOM)
    figure, axes = pyplot.subplots(figsize=(8, 0.42 * len(bars) + 2.4), layout="constrained")
    axes.set_xscale("log")
    axes.barh(
        names,
        [ratio - 1 for ratio in ratios],
        left=1,
        color=[FASTER if ratio >= 1 else SLOWER for ratio in ratios],
        edgecolor="white",
    )
    axes.axvline(1, color=EVEN, linestyle="--", linewidth=1)
    axes.invert_yaxis()
    axes.set_xlim(1 / reach, reach)
    positions = sorted({1 / mark for mark in marks} | set(marks))
    axes.set_xticks(positions, [tick_label(mark) for mark in positions], fontsize=8)
    axes.minorticks_off()
    for row, ratio in enumerate(ratios):
        side = "left" if ratio >= 1 else "right"
        axes.text(ratio, row, " %s " % label(ratio), va="center", ha=side, fontsize=9)
    axes.set_title(title, fontsize=11)
    note = ""
    if left_out:
        shown = ", ".join("%s (%s)" % (name, why) for name, why in left_out)
        note = "\n" + "\n".join(textwrap.wrap("Not shown: " + shown, NOTE_WIDTH))
    axes.set_xlabel(axis_label + note, fontsize=9)
    axes.grid(axis="x", alpha=0.3)
    handles = [
        Patch(color=FASTER, label="semidbm faster"),
        Patch(color=SLOWER, label="semidbm slower"),
        Line2D([], [], color=EVEN, linestyle="--", label="equal speed (1x)"),
    ]
    figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    figure.savefig(path, dpi=96)
    pyplot.close(figure)
