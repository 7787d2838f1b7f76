"""The comparison's report of a preset (Markdown, with its charts) and its terminal summary.

``Results`` holds what ``compare.py``'s runs of one preset gave and
computes the medians and per-repetition ratios the report quotes;
``report`` writes the Markdown of ``compare.py``'s docstring, and
``summary`` the few lines the terminal shows.
"""

import os
import platform
import statistics
import tempfile
import textwrap

import _charts
from _presets import ALONE_TARGETS, OPEN_TARGET_SECONDS, POOL_TARGET, PROCESS_SIZES
from _provenance import (
    cpu_model,
    filesystem_type,
    from_top,
    quoted_command,
    run_date,
    source_version,
)
from _report import (
    aligned_blocks,
    format_number,
    format_ratio,
    format_seconds,
    markdown_table,
    significant,
    spread_cell,
    times,
    times_with_range,
    verdict,
)

#: The contenders the ratio tables compare against all the others.
BASELINES = ["semidbm", "semidbm-python"]

#: The contender the terminal summary and the charts set against the others.
OURS = "semidbm"

#: The widest line of the terminal summary, in characters.
SUMMARY_WIDTH = 100

#: What the summary's notes on each contender (``contender_notes``) set it against.
NOT_LIKE_FOR_LIKE = (
    "Not like for like (semidbm's writes are durable once sync() or close() returns; a killed "
    "process loses what it had not written out):"
)


class Results:
    """What the runs of one preset gave, with the medians and ratios the report quotes.

    ``runs`` maps each contender that ran to its worker results, one per
    repetition; ``absent`` maps each other contender to why it did not run.
    """

    def __init__(self, preset, runs, absent):
        self.preset = preset
        self.runs = runs
        self.absent = absent

    def missing_cell(self, name):
        """The table cell of a contender that did not run: its reason's first words ("missing")."""
        return self.absent[name].split(":")[0]

    def ops(self, name, workload):
        """The median ops/s of ``name`` on ``workload``; None where it does not apply."""
        values = [run["ops_per_sec"][workload] for run in self.runs[name]]
        return None if None in values else statistics.median(values)

    def reopen(self, name):
        """The median reopen seconds of ``name``; None for the dict."""
        values = [run["reopen_seconds"] for run in self.runs[name]]
        return None if None in values else statistics.median(values)

    def keys(self, name):
        """The number of keys contender ``name`` ran on (None for the shelf presets)."""
        return self.runs[name][0].get("keys")

    def fewer_keys(self):
        """The contenders that ran on fewer keys than the most any ran on, with their keys."""
        counts = {name: self.keys(name) for name in self.runs}
        most = max((count for count in counts.values() if count is not None), default=None)
        return {name: count for name, count in counts.items() if count is not None and count < most}

    def ratio(self, mine, theirs, workload):
        """The median per-repetition ratio of ``mine`` to ``theirs``; None if either lacks it."""
        ratios = self.ratios(mine, theirs, workload)
        return None if ratios is None else statistics.median(ratios)

    def ratios(self, mine, theirs, workload):
        """The ratio of ``mine`` to ``theirs`` in each repetition; None if either lacks it.

        For ``reopen`` it is their seconds over mine (above 1: mine is
        faster), as for every other workload, and None unless both ran
        on the same number of keys: a reopen's time grows with the db.
        """
        if mine not in self.runs or theirs not in self.runs:
            return None
        if workload == "reopen" and self.keys(mine) != self.keys(theirs):
            return None
        ratios = []
        for my_run, their_run in zip(self.runs[mine], self.runs[theirs]):
            if workload == "reopen":
                a, b = their_run["reopen_seconds"], my_run["reopen_seconds"]
            else:
                a, b = my_run["ops_per_sec"][workload], their_run["ops_per_sec"][workload]
            if a is None or b is None:
                return None
            ratios.append(a / b)
        return ratios


def parameters(preset, settings):
    """Describe the data set of ``preset`` as ``settings`` size it, for the report and summary."""
    if preset.classic:
        text = "%s keys of %d bytes, values of %s bytes" % (
            format_number(settings.keys),
            settings.key_size,
            format_number(settings.value_size),
        )
    elif preset.name == "c":
        text = "50 and 2,000 items (str keys, dicts of five fields) through shelve"
    elif preset.name == "e":
        sizes = {name: format_number(n) for name, n in PROCESS_SIZES[settings.quick].items()}
        text = (
            "keys of 16 bytes, values of 100 bytes; 4 processes fill one store with %(fill)s "
            "keys, then run %(mixed)s operations each on it; a writer alone puts %(alone)s "
            "keys; 2 pool workers read %(pool)s (the slow contenders fewer: see the notes)"
            % sizes
        )
    else:
        text = "5,000 values of 1,000,000 bytes through shelve, sync() every 250 writes"
    if settings.quick:
        text += " (shrunk by --quick: a smoke test, not a measurement)"
    return text


def figures(preset):
    """Say what the figures of ``preset`` are: what a pass times, and what counts."""
    if preset.classic:
        return (
            "Figures are operations per second over a whole pass (higher is better). "
            "Opening a db is not timed but in read_cold (see below); closing a written "
            "one (for lmdb: committing the transaction and closing the environment) is."
        )
    if preset.name == "e":
        return (
            "Figures are operations per second of all the processes together (higher is "
            "better), from the first one's start to the last one's end: the processes start, "
            "open the store, touch their share of the data (forked, they would otherwise copy its "
            "pages on first write, in the timed loop) and wait at a barrier before the clock "
            "starts, and close after it stops (each operation is in the file when it returns)."
        )
    if preset.name == "c":
        return (
            "Figures are items per second over a whole pass that opens the shelf, does its "
            "work and closes it (higher is better); each pass is repeated for at least "
            "0.3 s and the median pass counts."
        )
    return (
        "Figures are values per second over a whole pass that opens the shelf, does "
        "its work and closes it (higher is better)."
    )


def header(preset, settings, source_at_start):
    """The report's title and the bullet list of how it was made."""
    source_at_end = source_version()
    if source_at_end == source_at_start:
        source = "- semidbm source: commit %s" % source_at_start
    else:
        source = (
            "- semidbm source: **changed during the run**, from commit %s to %s: "
            "the repetitions may have run different code" % (source_at_start, source_at_end)
        )
    temporary = tempfile.gettempdir()
    return [
        "# semidbm benchmark, preset %s: %s" % (preset.name, preset.title),
        "",
        "- Command: `%s` (run from the repository's top directory)" % quoted_command(),
        "- Date: %s" % run_date(),
        "- Machine: %s, %d CPUs, %s" % (cpu_model(), os.cpu_count(), platform.platform()),
        source,
        "- Databases in: %s (%s)" % (temporary, filesystem_type(temporary)),
        "- Parameters: %s; %d repetitions, contenders interleaved, each run a fresh "
        "process; the data set is the same for every contender in a repetition "
        "(seed = repetition number)" % (parameters(preset, settings), settings.repeat),
        "- " + figures(preset) + " Every run checked what it read back.",
        "",
    ]


def keys_cell(results, name):
    """The contenders table's cell for the number of keys ``name`` ran on (classic presets)."""
    slow = " (fewer: slow)" if name in results.fewer_keys() else ""
    return format_number(results.keys(name)) + slow


def contenders_section(results):
    """The table of contenders: what each one is and how durable, or why it did not run."""
    classic = results.preset.classic
    header = ["contender", "implementation", "Python"]
    header += ["keys"] if classic else []
    header += ["durability at its defaults"]
    rows = []
    for name in results.preset.contenders:
        if name in results.runs:
            first = results.runs[name][0]
            row = [name, first["implementation"], first["python"]]
            row += [keys_cell(results, name)] if classic else []
            rows.append(row + [first["durability"]])
        else:
            rows.append([name, results.absent[name]] + [""] * (len(header) - 2))
    lines = ["## Contenders", "", markdown_table(header, rows, False), ""]
    if results.fewer_keys():
        lines += [
            "The slow contenders ran on fewer keys, so that the preset ends in its time "
            "(`--all-keys` runs them on every key): their ratios set semidbm's rate on the "
            "whole data set against theirs on a smaller db, which is no slower per "
            "operation, so they flatter them if anything.",
            "",
        ]
    return lines


def speed_sections(results, repeat):
    """The median ops/s table and, for each baseline that ran, its ratio table."""
    preset = results.preset

    def cell(name, workload):
        if name not in results.runs:
            return results.missing_cell(name)
        value = results.ops(name, workload)
        return "n/a" if value is None else format_number(value)

    rows = [[w] + [cell(name, w) for name in preset.contenders] for w in preset.workloads]
    lines = [
        "## Operations per second",
        "",
        "Each cell: the median, over the %d repetitions, of that contender's own "
        "operations per second (higher is better). Two cells of a row need not divide to "
        "the ratio the next tables give: those are medians of the per-repetition ratios, "
        "each taken between runs made one after the other, which cancels the drift of a "
        "shared machine from one repetition to the next; a ratio of two medians can pair "
        "figures from different repetitions." % repeat,
        "",
        markdown_table(["workload"] + preset.contenders, rows),
        "",
    ]
    for baseline in BASELINES:
        if baseline not in results.runs:
            continue
        others = [name for name in preset.contenders if name != baseline]

        def ratio(name, workload):
            if name not in results.runs:
                return results.missing_cell(name)
            return spread_cell(results.ratios(baseline, name, workload))

        rows = [[w] + [ratio(name, w) for name in others] for w in preset.workloads]
        lines += [
            "## %s relative to each contender" % baseline,
            "",
            "Each cell: the median over the %d repetitions of (%s's ops/s) / (the "
            "contender's ops/s) in the same repetition: above 1 means %s is faster; in "
            "brackets, the least and the greatest of those ratios." % (repeat, baseline, baseline),
            "",
            markdown_table(["workload"] + ["vs %s" % name for name in others], rows),
            "",
        ]
    return lines


def reopen_sections(results, repeat):
    """Classic presets: the reopen times and the index memory per key."""
    contenders = results.preset.contenders

    def reopen_cell(name):
        if name not in results.runs:
            return results.missing_cell(name)
        value = results.reopen(name)
        return "n/a" if value is None else format_seconds(value)

    def reopen_ratio(baseline, name):
        if name == baseline:
            return ""
        if name not in results.runs:
            return results.missing_cell(name)
        value = results.ratio(baseline, name, "reopen")
        return "n/a" if value is None else format_ratio(value)

    rows = [["seconds"] + [reopen_cell(name) for name in contenders]]
    rows += [
        ["ratio to %s" % baseline] + [reopen_ratio(baseline, name) for name in contenders]
        for baseline in BASELINES
        if baseline in results.runs
    ]

    def memory_cell(name):
        if name not in results.runs:
            return results.missing_cell(name)
        values = [run["index_bytes_per_key"] for run in results.runs[name]]
        return "{:.1f}".format(statistics.median(values))

    return [
        "## Reopen, seconds (lower is better)",
        "",
        "The time to open the db that fill_sequential wrote, take its length and look up "
        "one key, in a fresh process, with the file still in the page cache: `open()`, "
        "`len()` (`len(db.keys())` for semidbm 0.5.1, which has no `len()`; none for "
        "rocksdict, which keeps no length) and `db[key]`; for lmdb, `lmdb.open()`, then "
        'one read transaction\'s `stat()["entries"]` and `get(key)`. A dict has no file '
        "to reopen.",
        "",
        "The row \"seconds\" gives the median over the %d repetitions of each "
        "contender's own time. A row \"ratio to X\" gives, for each contender, the median "
        "over the repetitions of (contender's seconds) / (X's seconds) in the same "
        "repetition: above 1 means X reopens faster. These times are milliseconds or "
        "less, where a moment of the machine's other work weighs heavily, so a ratio of "
        "the two medians in the first row can be far from the median ratio below it: "
        "the median ratio pairs runs made one after the other. A contender that ran on "
        "fewer keys has no ratio (n/a): its db is smaller." % repeat,
        "",
        markdown_table([""] + contenders, rows),
        "",
        "## Index memory, bytes per key (median of %d)" % repeat,
        "",
        "The growth of the process's anonymous resident memory (RssAnon in "
        "/proc/self/status, read after `gc.collect()`) from just before the reopen above "
        "to just after it, divided by the number of keys; the data set was already in "
        "memory before the first reading. For the dict: the dict built from the data set "
        "(its table only, since the keys and values are the data set's). Pages mapped "
        "from a file (lmdb's whole tree, gdbm's and semidbm's mapped reads) are page "
        "cache, not anonymous memory, and are not counted.",
        "",
        markdown_table(
            [""] + contenders, [["bytes per key"] + [memory_cell(n) for n in contenders]]
        ),
        "",
        "read_cold evicts the db's files from the page cache (`posix_fadvise` "
        "`POSIX_FADV_DONTNEED`, after an fsync) and then times the open and a read of "
        "every key in the order written: semidbm's open reads its index file (or, "
        "without one, the whole log), so leaving the open out would favour it.",
        "",
    ]


def copy_rate_section(results, settings, repeat):
    """Large values: how close each contender's reads come to a plain copy of the values."""
    rates = [run["copy_bytes_per_sec"] for runs in results.runs.values() for run in runs]
    if not rates or None in rates:
        return []
    rate = statistics.median(rates)
    reads = [w for w in results.preset.workloads if w.startswith("read")]
    contenders = [name for name in results.preset.contenders if name in results.runs]

    def cell(name, workload):
        value = results.ops(name, workload)
        if value is None:
            return "n/a"
        return "{:.0%}".format(value * settings.value_size / rate)

    rows = [[w] + [cell(name, w) for name in contenders] for w in reads]
    return [
        "## Reads as a fraction of the memory copy rate",
        "",
        "Every read of a value returns a new bytes object of %s bytes, so no read can be "
        "faster than copying that many bytes. Copying values of that size out of one "
        "large bytes object (each slice a new bytes object, over more memory than the "
        "caches hold) ran at %.2f GB/s here (median over all runs); the table gives each "
        "contender's read rate (ops/s times the value size) as a fraction of it."
        % (format_number(settings.value_size), rate / 1e9),
        "",
        markdown_table(["workload"] + contenders, rows),
        "",
    ]


#: The measurement "alone"'s ways of writing, as the report names them.
ALONE_WAYS = {"single": "single puts", "update": "update() of 1,000 items"}


def own_runs(results, measurement):
    """The semidbm kernels whose runs have ``measurement`` ("alone", "pool"), with those runs."""
    return {
        name: [run[measurement] for run in results.runs[name]]
        for name in BASELINES
        if name in results.runs and results.runs[name][0].get(measurement)
    }


def median_number(values):
    """The median of ``values``, written as a whole number with thousands separators."""
    return format_number(statistics.median(values))


def alone_ratios(runs, way):
    """A writer alone: the shared/exclusive ratio of ``way`` in each of ``runs``."""
    return [run[way]["shared"] / run[way]["exclusive"] for run in runs]


def pool_ratios(runs):
    """The pool: the ratio of the workers' rate to one process's, in each of ``runs``."""
    return [run["workers"] / run["one_process"] for run in runs]


def alone_section(results):
    """Preset e: a shared writer alone against the exclusive one, for each semidbm kernel."""
    kernels = own_runs(results, "alone")
    rows = []
    for name, runs in kernels.items():
        for way, title in ALONE_WAYS.items():
            ratios = alone_ratios(runs, way)
            median = statistics.median(ratios)
            rows.append(
                [name, title]
                + [median_number(r[way][mode] for r in runs) for mode in ("exclusive", "shared")]
                + [spread_cell(ratios), "at least %sx" % significant(ALONE_TARGETS[way])]
                + [verdict(median >= ALONE_TARGETS[way])]
            )
    if not rows:
        return []
    header = ["contender", "writes", "exclusive ops/s", "shared ops/s", "shared/exclusive"]
    return [
        "## A writer alone: shared against exclusive",
        "",
        "One process, no other, puts every key into a new database, with the exclusive "
        "writer (flag 'n') and with a shared writer (flag 'cm'), taking turns for three "
        "rounds whose median counts; closing is not timed (the exclusive writer's last "
        "buffer, up to 1 MiB, is still in memory then). The ratio is the median over the "
        "repetitions, the least and greatest in brackets.",
        "",
        markdown_table(header + ["target", "met"], rows, False),
        "",
    ]


def pool_section(results):
    """Preset e: a read-only handle pickled to two pool workers, against one process."""
    kernels = own_runs(results, "pool")
    rows = []
    for name, runs in kernels.items():
        ratios = pool_ratios(runs)
        opens = [seconds for run in runs for seconds in run["open_seconds"]]
        rows.append(
            [name]
            + [median_number(r[rate] for r in runs) for rate in ("one_process", "workers")]
            + [spread_cell(ratios), verdict(statistics.median(ratios) >= POOL_TARGET)]
            + ["%.3f" % (statistics.median(opens) * 1000), "%.3f" % (max(opens) * 1000)]
            + [verdict(max(opens) < OPEN_TARGET_SECONDS)]
        )
    if not rows:
        return []
    header = ["contender", "one process, reads/s", "2 workers, reads/s", "workers/one"]
    header += ["at least %sx" % significant(POOL_TARGET), "open, ms (median)", "open, ms (most)"]
    header += ["every open under %s ms" % significant(OPEN_TARGET_SECONDS * 1000)]
    return [
        "## A handle sent to two worker processes",
        "",
        "A read-only database is pickled and sent to the 2 workers of a "
        "`concurrent.futures.ProcessPoolExecutor` (started, having touched the keys they "
        "read, and waiting, before the clock starts), each of which unpickles it and reads "
        "its half of the keys in a shuffled order; timed from the pickling to the last "
        "answer. Against one process that opens the database and reads every key in the "
        "same order. A worker's open is `pickle.loads` of the handle and its first read. "
        "Over all repetitions: the ratio's median, with the least and greatest in brackets; "
        "the opens of every worker.",
        "",
        markdown_table(header, rows, False),
        "",
    ]


def own_summary(results):
    """Preset e: one line per semidbm kernel for the terminal, its own two measurements."""
    lines = []
    alone, pool = own_runs(results, "alone"), own_runs(results, "pool")
    for name in alone:
        single, update = (statistics.median(alone_ratios(alone[name], way)) for way in ALONE_WAYS)
        opens = [seconds for run in pool[name] for seconds in run["open_seconds"]]
        lines.append(
            "%s alone, shared/exclusive: single puts %s, update() %s; 2 pool workers/one "
            "process: %s, opens up to %.3f ms."
            % (
                name,
                format_ratio(single),
                format_ratio(update),
                format_ratio(statistics.median(pool_ratios(pool[name]))),
                max(opens) * 1000,
            )
        )
    return lines


def targets_section(results):
    """The preset's targets for semidbm, each with its measured median ratio."""
    preset = results.preset
    if not preset.targets:
        return []
    rows = []
    for workload, other, factor in preset.targets:
        wanted = ("more than %sx" if preset.strict else "at least %sx") % significant(factor)
        value = results.ratio("semidbm", other, workload)
        if value is None:
            rows.append([workload, other, wanted, "not measured", ""])
            continue
        met = value > factor if preset.strict else value >= factor
        rows.append([workload, other, wanted, format_ratio(value), verdict(met)])
    return [
        "## Targets",
        "",
        "semidbm (compiled) against each contender named, as the median per-repetition "
        "ratio (for reopen: their seconds over ours).",
        "",
        markdown_table(["workload", "against", "target", "measured", "met"], rows, False),
        "",
    ]


def notes_section(results):
    """Each distinct note of each contender's runs, once."""
    notes = []
    for name in results.preset.contenders:
        for note in dict.fromkeys(n for run in results.runs.get(name, []) for n in run["notes"]):
            notes.append("- %s: %s." % (name, note))
    return ["## Notes", ""] + notes + [""] if notes else []


def chart_bars(results, workload):
    """The bars of ``workload``'s chart: ``(label, ratio)`` for each contender with a ratio.

    The ratio is semidbm's to the contender, the median of the
    per-repetition ratios; a label names the keys of a contender that
    ran on fewer.
    """
    fewer = results.fewer_keys()
    bars = []
    for name in results.preset.contenders:
        value = None if name == OURS else results.ratio(OURS, name, workload)
        if value is not None:
            label = name + (" (%s keys)" % format_number(fewer[name]) if name in fewer else "")
            bars.append((label, value))
    return bars


def left_out(results, workload):
    """The contenders without a bar in ``workload``'s chart, each with why: ``(name, why)``.

    One that did not run gives its reason's first words ("missing",
    "not run", "cannot"); a reopen on fewer keys than semidbm's has no
    ratio (its db is smaller); otherwise the workload does not apply (a
    dict has no file to read cold or reopen).
    """
    found = []
    for name in results.preset.contenders:
        if name == OURS or results.ratio(OURS, name, workload) is not None:
            continue
        if name not in results.runs:
            why = results.missing_cell(name)
        elif workload == "reopen" and name in results.fewer_keys():
            why = "ran on fewer keys"
        else:
            why = "does not apply"
        found.append((name, why))
    return found


def draw_charts(results, out_dir):
    """Write one ratio chart (PNG) per workload to ``out_dir``; return the Markdown showing them."""
    preset = results.preset
    workloads = preset.workloads + (["reopen"] if preset.classic else [])
    lines = [
        "## Charts",
        "",
        "One chart per workload: how many times faster (or slower) semidbm is than each "
        "contender, the median of the per-repetition ratios, on a logarithmic scale centred "
        "on 1x (equal speed): faster to the right, slower to the left. The contenders "
        "without a bar are named under each chart.",
        "",
    ]
    for workload in workloads:
        bars = chart_bars(results, workload)
        if not bars:
            continue
        filename = "preset-%s-%s.png" % (preset.name, workload)
        what = "seconds to reopen" if workload == "reopen" else "operations per second"
        missing = left_out(results, workload)
        _charts.ratio_chart(
            os.path.join(out_dir, filename),
            "Preset %s, %s: semidbm against each contender" % (preset.name, workload),
            bars,
            "semidbm's speed / the contender's (from %s; logarithmic)" % what,
            times,
            missing,
        )
        lines += ["![%s](%s)" % (workload, filename), ""]
        if missing:
            shown = ", ".join("%s (%s)" % (name, why) for name, why in missing)
            lines += ["Not in this chart: %s." % shown, ""]
    return lines


def report(results, settings, source_at_start, out_dir):
    """Return the Markdown report of one preset, drawing its charts in ``out_dir``."""
    lines = header(results.preset, settings, source_at_start)
    lines += contenders_section(results)
    lines += speed_sections(results, settings.repeat)
    if results.preset.classic:
        lines += reopen_sections(results, settings.repeat)
        lines += copy_rate_section(results, settings, settings.repeat)
    lines += alone_section(results)
    lines += pool_section(results)
    lines += targets_section(results)
    lines += notes_section(results)
    lines += draw_charts(results, out_dir)
    return "\n".join(lines)


def contender_notes(results):
    """The summary's notes: one for each contender whose figures are not like semidbm's.

    Each names what differs: fewer keys, what its worker measured
    otherwise (its notes: dbm.dumb's deletes over 100 keys), and its
    durability (the worker's ``durability_note``).
    """
    fewer = results.fewer_keys()
    most = max([results.keys(name) or 0 for name in results.runs], default=0)
    notes = []
    for name in results.preset.contenders:
        if name == OURS or name not in results.runs:
            continue
        runs = results.runs[name]
        parts = []
        if name in fewer:
            parts.append("on %s keys, not %s" % (format_number(fewer[name]), format_number(most)))
        parts += dict.fromkeys(note for run in runs for note in run["notes"])
        if runs[0].get("durability_note"):
            parts.append(runs[0]["durability_note"])
        if parts:
            notes.append("%s: %s." % (name, "; ".join(parts)))
    return notes


def summary(results, settings, report_path):
    """The terminal's summary of a preset: semidbm against each contender, and the report's path.

    Prose is wrapped and the table split into blocks to fit SUMMARY_WIDTH
    columns; only the report's path may run longer.
    """
    preset = results.preset
    others = [name for name in preset.contenders if name != OURS and name in results.runs]
    workloads = preset.workloads + (["reopen"] if preset.classic else [])
    prose = ["Preset %s (%s): %s." % (preset.name, preset.title, parameters(preset, settings))]
    table = []
    if OURS not in results.runs:
        prose.append("semidbm did not run: %s." % results.absent[OURS])
    elif others:
        ratios = (
            "the ratio of one repetition"
            if settings.repeat == 1
            else "the median of %d per-repetition ratios" % settings.repeat
        )
        if preset.classic:
            ratios += (
                " of operations per second (for reopen, of seconds). n/a: the workload does "
                "not apply, or the contender's db was smaller"
            )
        else:
            ratios += " of %s per second. n/a: the workload does not apply" % (
                "operations" if preset.name == "e" else "items"
            )
        if settings.repeat > 1:
            ratios += (
                "; in brackets, the least and the greatest of them (for \"slower\", how many "
                "times slower)"
            )
        prose.append(
            "How many times faster or slower semidbm is than each contender: %s." % ratios
        )
        rows = []
        for workload in workloads:
            cells = [results.ratios(OURS, name, workload) for name in others]
            rows.append([workload] + ["n/a" if c is None else times_with_range(c) for c in cells])
        table = aligned_blocks(["workload"] + others, rows, SUMMARY_WIDTH)
    differences = contender_notes(results)
    notes = own_summary(results)
    notes += ["%s %s." % (name, results.absent[name]) for name in results.absent if name != OURS]
    lines = [""]
    for paragraph in prose:
        lines += textwrap.wrap(paragraph, SUMMARY_WIDTH)
    lines += [""] + table + ([""] if table else [])
    if differences:
        lines += textwrap.wrap(NOT_LIKE_FOR_LIKE, SUMMARY_WIDTH)
        for note in differences:
            lines += textwrap.wrap(
                note, SUMMARY_WIDTH, initial_indent="  ", subsequent_indent="    "
            )
        lines += [""] if notes else []
    for note in notes:
        lines += textwrap.wrap(note, SUMMARY_WIDTH, subsequent_indent="  ")
    lines += ["", "Full report: %s" % from_top(report_path)]
    return lines
