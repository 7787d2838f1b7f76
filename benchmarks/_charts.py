"""Draws the comparison's charts: one PNG per workload, a bar per contender.

Used by ``benchmarks/compare.py --out-dir``. matplotlib (in the ``bench``
extra) is imported only here, so the benchmark itself runs without it.
The scale is logarithmic, since the contenders span a factor of 1,000
and more; each bar is labelled with its figure.
"""

#: Bar colours: our compiled kernel, the rest of semidbm, everyone else.
OURS = "#d9480f"
OUR_OTHERS = "#f08c00"
OTHERS = "#4263eb"


def colour(name):
    """Return the bar colour of contender ``name``."""
    if name == "semidbm":
        return OURS
    return OUR_OTHERS if name.startswith("semidbm") else OTHERS


def bar_chart(path, title, bars, axis_label, label):
    """Write a horizontal bar chart of ``bars`` (``(contender, value)`` pairs) to ``path``.

    ``axis_label`` names the unit; ``label(value)`` is the text beside a bar.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    names = [name for name, _ in bars]
    values = [value for _, value in bars]
    figure, axes = pyplot.subplots(figsize=(7.5, 0.42 * len(bars) + 1.3))
    axes.barh(names, values, color=[colour(name) for name in names])
    axes.set_xscale("log")
    axes.invert_yaxis()
    axes.set_xlim(min(values) / 2, max(values) * 8)
    for row, value in enumerate(values):
        axes.text(value, row, " " + label(value), va="center", fontsize=9)
    axes.set_title(title, fontsize=11)
    axes.set_xlabel(axis_label)
    axes.grid(axis="x", which="major", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=96)
    pyplot.close(figure)
