"""Tables and figures as the benchmarks' reports print them.

Every script's report goes through these, so that a table, a count or a
ratio looks the same in each: Markdown tables for the reports, aligned
columns for a terminal, numbers with thousands separators or to three
significant digits.
"""

import math
import statistics


def markdown_table(header, rows, numeric=True):
    """Return a Markdown table; with ``numeric``, all columns but the first are right-aligned."""
    rule = "|---:" if numeric else "|---"
    lines = [
        "| " + " | ".join(header) + " |",
        "|---" + rule * (len(header) - 1) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def aligned_blocks(header, rows, width):
    """Return text lines of a table aligned in columns, split into blocks of at most ``width``.

    The first column (the row names) starts every block; the other
    columns are right-aligned and go into as many blocks as the width
    needs, one blank line between blocks.
    """
    table = [header] + rows
    widths = [max(len(row[column]) for row in table) for column in range(len(header))]
    blocks, block = [], []
    used = widths[0]
    for column in range(1, len(header)):
        if block and used + 2 + widths[column] > width:
            blocks.append(block)
            block, used = [], widths[0]
        block.append(column)
        used += 2 + widths[column]
    blocks.append(block)
    lines = []
    for block in blocks:
        if lines:
            lines.append("")
        for row in table:
            cells = [row[0].ljust(widths[0])] + [row[c].rjust(widths[c]) for c in block]
            lines.append("  ".join(cells).rstrip())
    return lines


def format_number(value):
    """Format a number whole, with thousands separators: ``1,000,000``."""
    return "{:,.0f}".format(value)


def significant(value, digits=3):
    """Format ``value`` to ``digits`` significant digits without an exponent.

    E.g. ``0.000390``, ``1.20``, ``4610``: the reopen times and their
    ratios span several orders of magnitude, and a fixed number of
    decimals would print the small ones as zero.
    """
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return "{:.{}f}".format(value, decimals)


def format_seconds(value):
    """Format seconds to three significant digits, e.g. ``0.0123``."""
    return significant(value)


def format_ratio(value):
    """Format a ratio to three significant digits, e.g. ``1.23x`` or ``0.00180x``."""
    return significant(value) + "x"


def spread_cell(ratios):
    """A ratio table's cell: the median of the per-repetition ``ratios``, with their range.

    "n/a" for None; one repetition has no range to give.
    """
    if ratios is None:
        return "n/a"
    cell = format_ratio(statistics.median(ratios))
    if len(ratios) > 1:
        cell += " (%s-%s)" % (significant(min(ratios)), significant(max(ratios)))
    return cell


def times(ratio):
    """Say how many times faster or slower mine / theirs is: ``2.50x faster``."""
    if ratio >= 1:
        return "%sx faster" % significant(ratio)
    return "%sx slower" % significant(1 / ratio)


def times_with_range(ratios):
    """``times`` of the median of the per-repetition ``ratios``, then their least and greatest.

    The range is in the median's sense: for "slower", how many times
    slower each repetition was, so ``1.30x slower (1.10-1.60)``; one
    repetition has no range to give.
    """
    median = statistics.median(ratios)
    cell = times(median)
    if len(ratios) > 1:
        low, high = min(ratios), max(ratios)
        if median < 1:
            low, high = 1 / high, 1 / low
        cell += " (%s-%s)" % (significant(low), significant(high))
    return cell


def verdict(met):
    """The "met" cell of a target: yes, or a bold no."""
    return "yes" if met else "**no**"
