"""Read valgrind memcheck XML reports: count the errors that involve the compiled kernel.

``python -m tests.harness.valgrind REPORT.xml ...`` prints every error
kind found and exits with 1 if any error (leak reports aside) has a
frame in ``semidbm/_core``. Leak reports are left out: the interpreter
keeps module-level objects, the kernel's types among them, alive until
exit, which memcheck lists as possibly lost. The nox session memcheck runs it.
"""

import collections
import sys
import xml.etree.ElementTree as ElementTree


def errors(paths):
    """Yield (kind, frames) for each error in the reports; frames are (function, object) pairs."""
    for path in paths:
        for error in ElementTree.parse(path).getroot().iter("error"):
            frames = [
                (frame.findtext("fn") or "?", frame.findtext("obj") or "?")
                for frame in error.iter("frame")
            ]
            yield error.findtext("kind"), frames


def in_kernel(frames):
    return any("_core" in obj.rsplit("/", 1)[-1] for _, obj in frames)


def main(paths):
    kinds = collections.Counter()
    found = []
    for kind, frames in errors(paths):
        if kind.startswith("Leak_"):
            continue
        kinds[kind, in_kernel(frames)] += 1
        if in_kernel(frames):
            found.append((kind, frames))
    print("memcheck: %d reports, %d errors outside leaks, %d of them in the compiled kernel" % (
        len(paths), sum(kinds.values()), len(found)))
    for (kind, ours), count in sorted(kinds.items()):
        print("  %6d  %s%s" % (count, kind, " (compiled kernel)" if ours else " (elsewhere)"))
    for kind, frames in found[:10]:
        print("ERROR %s:" % kind)
        for function, obj in frames[:15]:
            print("    %s  (%s)" % (function, obj))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
