"""A script run in a new interpreter on the kernel under test.

The tests of processes (a second writer, fork, a reader beside a writer)
run real interpreters: each starts with ``PRELUDE``, which checks that
the child uses the kernel under test and names the database's path.
"""

import os
import subprocess
import sys
import textwrap

from ..conftest import kernel_name


def environment(kernel):
    """The environment that makes a child interpreter use ``kernel``."""
    env = {k: v for k, v in os.environ.items() if k != "SEMIDBM_PURE_PYTHON"}
    if kernel_name(kernel) == "python":
        env["SEMIDBM_PURE_PYTHON"] = "1"
    return env


PRELUDE = """
import os, sys, gc
import semidbm
assert semidbm.implementation == sys.argv[1], semidbm.implementation
path = sys.argv[2]
"""


def run(kernel, script, path, **options):
    """Run ``script`` (after PRELUDE) in a new interpreter; return the CompletedProcess."""
    code = PRELUDE + textwrap.dedent(script)
    result = subprocess.run(
        [sys.executable, "-c", code, kernel_name(kernel), str(path)],
        env=environment(kernel),
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )
    assert result.returncode == 0, result.stderr
    return result
