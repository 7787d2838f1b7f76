"""CI: every phase of .ci/run, two at a time, with each phase's time against its budget.

``.ci/run`` runs this with Debian's Python, the table of phases on its
standard input (``parse``: each phase's name, budget, options and
command). The phases are nox sessions (``scripts/nox.sh``, sessions in
noxfile.py); each runs in its own
process group, its output into a log file of its own, printed whole when
it ends, so that two phases running side by side never mix their lines.
A phase that needs the work of another (the Debian unstable Pythons need
the folder made by debootstrap) starts once that one has passed.

The machine has two processors: two phases run at once, each running its
tests in one process (``SEMIDBM_TEST_PROCESSES=1``: the suites' own
spreading over processors would only make them wait for each other),
but the whole suite's, which runs as the README's command runs it, over
two processes (pytest-xdist), so that CI runs that way too. A
phase that mostly waits for the network (``network``) runs beside
them without taking a place. The sessions take their own locks where they
share files (noxfile.py: the build of the compiled kernel in the checkout,
semidbm 0.5.1's environment, the Debian unstable folder).

The run stops at the first phase that fails: the others are ended and the
run exits 1. It ends with the table of phases, each with its seconds and
its budget; a phase past its budget says so in the log (it does not fail
the run: the budgets say where the time goes, and the limit of the whole
run is the number that counts, ``RUN_BUDGET``), and a phase still running
at ``HUNG`` times its budget is taken as hung: ended, it fails the run.

Usage: ``bash .ci/run [NAME ...]`` runs the phases named (all by
default); ``bash .ci/run --list`` prints them.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Phases run at once (the processors of the machine CI runs on).
PLACES = 2

#: Seconds the whole run should take at most: the limit the project sets itself.
RUN_BUDGET = 25 * 60

#: Seconds between looks at the running phases.
POLL_SECONDS = 0.5

#: Seconds a phase ended because another failed has to stop before it is killed.
STOP_SECONDS = 10

#: A phase still running after this many times its budget has hung: it is ended, and fails.
HUNG = 3


@dataclass
class Phase:
    """One step of the run: a name, its command, its budget in seconds."""

    name: str
    command: list
    budget: int
    processor: bool = True  #: False: mostly waits (for the network), takes no place
    after: tuple = ()  #: the phases that must have passed before this one starts
    processes: int = 1  #: SEMIDBM_TEST_PROCESSES: the processes its tests are spread over
    process: object = field(default=None, repr=False)
    log: object = field(default=None, repr=False)
    started: float = 0.0
    seconds: float = 0.0


def parse(table):
    """The phases of ``table``, the text .ci/run gives: a line a phase, in the order they start.

    Each line is ``NAME | BUDGET | OPTIONS | COMMAND``: the budget in
    seconds; the options, separated by commas, ``first`` (every other
    phase waits for this one), ``network`` (mostly waits, takes no place),
    ``processes=N`` and ``after=NAME``; the command, run by bash from the
    top of the checkout. Blank lines and lines starting with ``#`` are
    left out. A line of another shape is a ValueError naming it.
    """
    phases, first = [], []
    for line in table.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [part.strip() for part in line.split("|", 3)]
        if len(fields) != 4 or not fields[1].isdigit() or not fields[3]:
            raise ValueError("not a phase (NAME | BUDGET | OPTIONS | COMMAND): %r" % line)
        name, budget, options, command = fields
        phase = Phase(name, ["bash", "-c", command], int(budget))
        for option in filter(None, (part.strip() for part in options.split(","))):
            word, _, value = option.partition("=")
            if option == "first":
                first.append(name)
            elif option == "network":
                phase.processor = False
            elif word == "processes" and value.isdigit():
                phase.processes = int(value)
            elif word == "after" and value:
                phase.after += (value,)
            else:
                raise ValueError("unknown option %r of the phase %r" % (option, name))
        phases.append(phase)
    for phase in phases:
        if phase.name not in first:
            phase.after += tuple(first)
    return phases


def say(text):
    print("=== " + text, flush=True)


class Run:
    """The phases to run, those running, and what has passed."""

    def __init__(self, selected, logs):
        self.waiting = list(selected)
        self.running = []
        self.done = []
        self.logs = logs
        self.begun = time.monotonic()
        self.selected = {phase.name for phase in selected}

    def elapsed(self):
        return time.monotonic() - self.begun

    def ready(self, phase):
        """True if every phase ``phase`` waits for has passed (or is not part of this run)."""
        passed = {done.name for done in self.done}
        return all(name in passed or name not in self.selected for name in phase.after)

    def start_what_fits(self):
        for phase in list(self.waiting):
            busy = sum(1 for running in self.running if running.processor)
            if phase.processor and busy >= PLACES:
                continue
            if not self.ready(phase):
                continue
            self.waiting.remove(phase)
            self.start(phase)

    def start(self, phase):
        phase.log = open(self.logs / ("%02d.log" % (len(self.done) + len(self.running))), "wb+")
        environment = dict(os.environ, SEMIDBM_TEST_PROCESSES=str(phase.processes))
        phase.started = time.monotonic()
        phase.process = subprocess.Popen(
            phase.command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=phase.log,
            stderr=subprocess.STDOUT, env=environment, start_new_session=True,
        )
        self.running.append(phase)
        say("phase started: %s (run so far: %d s)" % (phase.name, self.elapsed()))

    def finished(self):
        """The running phases that have ended, taken off the running list; a hung one is ended."""
        for phase in self.running:
            if time.monotonic() - phase.started > HUNG * phase.budget:
                say("phase hung: %s has run %d times its budget; ending it" % (phase.name, HUNG))
                end_group(phase.process)
        ended = [phase for phase in self.running if phase.process.poll() is not None]
        for phase in ended:
            phase.seconds = time.monotonic() - phase.started
            self.running.remove(phase)
        return ended

    def show(self, phase, outcome=None):
        """Print the whole output of ``phase``, then how it ended (``outcome``, or its status)."""
        sys.stdout.flush()
        phase.log.seek(0)
        shutil.copyfileobj(phase.log, sys.stdout.buffer)  # the bytes as they are, whatever they are
        sys.stdout.buffer.flush()
        phase.log.close()
        if outcome is None:
            outcome = "passed" if phase.process.returncode == 0 else (
                "FAILED (exit status %d)" % phase.process.returncode)
        say("phase %s: %s, %d s (run so far: %d s)"
            % (outcome, phase.name, phase.seconds, self.elapsed()))
        if phase.seconds > phase.budget:
            say("phase over its budget: %s took %d s, its budget is %d s"
                % (phase.name, phase.seconds, phase.budget))

    def stop_the_others(self):
        """End the running phases (``end_group``) and show what they printed."""
        for phase in self.running:
            end_group(phase.process)
            phase.seconds = time.monotonic() - phase.started
            self.show(phase, "stopped, as another failed")
        self.running = []

    def table(self):
        """The phases that ran, each with its seconds and budget, and the run's total."""
        width = max(len(phase.name) for phase in self.done)
        say("phases (seconds; budget):")
        for phase in self.done:
            over = "  OVER BUDGET" if phase.seconds > phase.budget else ""
            print("    %-*s %5d  %5d%s" % (width, phase.name, phase.seconds, phase.budget, over))
        total = self.elapsed()
        print("    %-*s %5d  %5d%s" % (width, "the whole run (phases two at a time)", total,
                                        RUN_BUDGET, "  OVER BUDGET" if total > RUN_BUDGET else ""),
              flush=True)


def end_group(process):
    """End ``process`` and its process group: SIGTERM, then SIGKILL after STOP_SECONDS.

    The group gets SIGKILL whether or not its leader ended by then, so that
    no child that ignores SIGTERM outlives the run.
    """
    signal_group(process, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    signal_group(process, signal.SIGKILL)
    process.wait()


def signal_group(process, number):
    """Send ``number`` to the process group ``process`` leads, if it is still there."""
    try:
        os.killpg(process.pid, number)
    except (ProcessLookupError, PermissionError):
        pass  # gone (a group of zombies refuses signals on some systems)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="the phases to run (default: all)")
    parser.add_argument("--list", action="store_true", help="print the phases and exit")
    options = parser.parse_args(argv)
    try:
        every = parse(sys.stdin.read())
    except ValueError as exc:
        parser.error("the phase table: %s" % exc)
    if options.list:
        for phase in every:
            print("%s (budget %d s)" % (phase.name, phase.budget))
        return 0
    unknown = set(options.names) - {phase.name for phase in every}
    if unknown:
        parser.error("no such phase: %s (--list names them)" % ", ".join(sorted(unknown)))
    selected = [phase for phase in every if not options.names or phase.name in options.names]
    # Ended by the CI's own time limit or by hand: the phases end with it.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(143))
    return execute(selected)


def execute(selected):
    """Run the phases ``selected``; print the table; return the exit status (0: all passed)."""
    with tempfile.TemporaryDirectory(prefix="semidbm-ci-") as logs:
        run = Run(selected, Path(logs))
        failed = None
        try:
            while (run.waiting or run.running) and failed is None:
                run.start_what_fits()
                if not run.running:
                    failed = "no phase can start: %s" % ", ".join(p.name for p in run.waiting)
                    break
                time.sleep(POLL_SECONDS)
                for phase in run.finished():
                    run.show(phase)
                    run.done.append(phase)
                    if phase.process.returncode != 0 and failed is None:
                        failed = phase.name
        finally:
            run.stop_the_others()
        if run.done:
            run.table()
    if failed is not None:
        say("the run FAILED: %s" % failed)
        return 1
    say("all phases passed in %d s" % run.elapsed())
    return 0


if __name__ == "__main__":
    sys.exit(main())
