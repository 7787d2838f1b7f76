"""What a benchmark report says of its run: the command, the machine, the source, the date.

A report is committed (``docs/bench``, ``docs/scale.md``), so what it
quotes names no directory of the machine that made it: paths are given
from the repository's top directory.
"""

import datetime
import os
import platform
import shlex
import subprocess
import sys

#: The repository's top directory.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def from_top(word):
    """Return ``word`` as seen from the repository's top directory, if it is a path there.

    An absolute path inside the repository, or a relative one that
    exists from the current directory, becomes relative to the top
    directory; any other word, an absolute path elsewhere among them
    (``/usr/bin/python3``), stays as it is.
    """
    full = os.path.abspath(word)
    if os.path.isabs(word):
        inside = os.path.commonpath([full, REPO]) == REPO
        return os.path.relpath(full, REPO) if inside else word
    return os.path.relpath(full, REPO) if os.path.exists(word) else word


def command_line(argv):
    """Return the words of ``argv`` to run from the repository's top directory.

    The report quotes them: a path of the checkout written absolute, or
    relative to another directory, would name this machine's layout.
    An option's value given as ``--out-dir=DIR`` is rewritten too.
    """
    words = []
    for word in argv:
        if word.startswith("--") and "=" in word:
            option, value = word.split("=", 1)
            words.append(option + "=" + from_top(value))
        else:
            words.append(from_top(word))
    return words


def quoted_command():
    """This program's command line, quoted for a shell started at the repository's top."""
    return shlex.join(command_line(sys.orig_argv))


def run_date():
    """The date and time now, to the minute, with the time zone: the reports' "Date"."""
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def source_version():
    """Return the repository's commit, and whether src/ has uncommitted changes.

    compare.py notes it at the start and at the end of a run: the
    workers import the source tree as it is when each one starts, so a
    change in between (a commit, a rebuilt kernel) would mix versions.
    """

    def git(*arguments):
        try:
            done = subprocess.run(["git", "-C", REPO, *arguments], capture_output=True, text=True)
        except FileNotFoundError:  # git is not installed
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return "unknown (not a git checkout)"
    if git("status", "--porcelain", "--", "src"):
        return commit + " with uncommitted changes in src/"
    return commit


def cpu_model():
    """Return the CPU model named in /proc/cpuinfo (or what platform knows)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def filesystem_type(path):
    """Return the type of the filesystem holding ``path``, from /proc/mounts."""
    path = os.path.realpath(path)
    best_mount, best_type = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                mount, kind = line.split()[1:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best_mount):
                    best_mount, best_type = mount, kind
    except OSError:
        pass
    return best_type

