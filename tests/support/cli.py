"""The ``semidbm`` command run as users run it, in a subprocess, and what it must answer.

``tests/conftest.py`` makes the fixtures ``tool`` (the command line that
starts it: the console script, or ``python -m semidbm``) and ``filled``
(a small database holding ``FILLED``).
"""

import os
import subprocess
import sys

#: The console script installed beside this interpreter.
SCRIPT = os.path.join(os.path.dirname(sys.executable), "semidbm")

#: The records of the ``filled`` database.
FILLED = {b"alpha": b"1", b"beta": b"two", b"bin\x00\xff": b"\x00\x01\x02"}


def run(tool, *args, input=None, stderr=subprocess.PIPE, env=None):
    """Run the tool with ``args``; stdout and stderr are bytes."""
    return subprocess.run(
        tool + [os.fspath(arg) for arg in args],
        input=input,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
        timeout=120,
    )


def one_error_line(result, status=1):
    """Check that the tool failed with ``status`` and one line on stderr; return the line."""
    assert result.returncode == status, result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in lines[0]
    assert lines[0].startswith("semidbm")
    return lines[0]
