"""Draws the comparison's charts: one PNG per workload, a bar per contender.

Used by ``benchmarks/compare.py``. matplotlib (in the ``bench`` extra) is
imported only here, so the benchmark itself runs without it. Each bar
is semidbm's speed over a contender's, on a linear axis from zero, so
that a bar twice as long means twice the gap; a dashed line marks equal
speed, the colour says which side of it a bar ends on (the legend names
both), and each bar is labelled with its figure ("36.2x faster"). A
ratio past ``AXIS_LIMIT`` (dbm.sqlite3 writes some 600 times slower)
would squash every other bar to nothing, so the axis stops there and
such a bar is cut at its end, hatched, with its figure beside it.
"""

#: Bar colours: semidbm faster than the contender, or slower.
FASTER = "#2f9e44"
SLOWER = "#e8590c"

#: The colour of the line at a ratio of 1 (equal speed).
EVEN = "#495057"

#: The axis ends here (or at the largest ratio, if smaller); longer bars are cut.
AXIS_LIMIT = 25


def ratio_chart(path, title, bars, axis_label, label):
    """Write a horizontal bar chart of ``bars`` (``(contender, ratio)`` pairs) to ``path``.

    A ratio is semidbm's speed over the contender's: above 1, semidbm is
    faster. ``axis_label`` names the ratio and its unit; ``label(ratio)``
    is the text beside a bar.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    names = [name for name, _ in bars]
    ratios = [ratio for _, ratio in bars]
    limit = min(max(max(ratios), 1), AXIS_LIMIT)
    cut = [ratio > limit for ratio in ratios]
    figure, axes = pyplot.subplots(figsize=(8, 0.42 * len(bars) + 2.1), layout="constrained")
    axes.barh(
        names,
        [min(ratio, limit) for ratio in ratios],
        color=[FASTER if ratio >= 1 else SLOWER for ratio in ratios],
        hatch=["//" if beyond else "" for beyond in cut],
        edgecolor="white",
    )
    axes.axvline(1, color=EVEN, linestyle="--", linewidth=1)
    axes.invert_yaxis()
    # Room on the right for the longest bar's label.
    axes.set_xlim(0, limit * 1.4)
    for row, ratio in enumerate(ratios):
        # A label starts past the line at 1, which a short bar does not reach.
        axes.text(max(min(ratio, limit), 1), row, " " + label(ratio), va="center", fontsize=9)
    axes.set_title(title, fontsize=11)
    axes.set_xlabel(axis_label)
    axes.grid(axis="x", alpha=0.3)
    handles = [
        Patch(color=FASTER, label="semidbm faster"),
        Patch(color=SLOWER, label="semidbm slower"),
        Line2D([], [], color=EVEN, linestyle="--", label="equal speed (1x)"),
    ]
    if any(cut):
        handles.append(
            Patch(facecolor="white", edgecolor=EVEN, hatch="//", label="cut at %gx" % limit)
        )
    figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    figure.savefig(path, dpi=96)
    pyplot.close(figure)
