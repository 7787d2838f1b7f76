"""semidbm 0.5.1 in a subprocess, for the tests of what it writes and reads beside this semidbm.

0.5.1 shares this semidbm's import name, so it runs in an interpreter of
its own, ``SEMIDBM_V051_PYTHON`` (the nox sessions make ``.venv-v051``).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from . import index_format as fmt


def v051_python():
    """The interpreter that has semidbm 0.5.1, from ``SEMIDBM_V051_PYTHON``.

    Without the variable the calling test is skipped, or fails when the
    environment variable ``CI`` is set: CI must run these tests.
    """
    python = os.environ.get("SEMIDBM_V051_PYTHON")
    if not python:
        message = (
            "SEMIDBM_V051_PYTHON is not set; it must name a Python with semidbm==0.5.1 "
            "installed (the nox sessions make .venv-v051 and set it: bash scripts/nox.sh -s tests)"
        )
        if "CI" in os.environ:
            pytest.fail(message + " -- required when CI is set", pytrace=False)
        pytest.skip(message)
    if not os.access(python, os.X_OK):
        pytest.fail("SEMIDBM_V051_PYTHON=%r is not an executable" % python, pytrace=False)
    return python


V051_SCRIPT = r"""
import json, sys
import semidbm
if semidbm.__version__ != "0.5.1":
    sys.exit("needs semidbm 0.5.1, found %s at %s" % (semidbm.__version__, semidbm.__file__))
path, flag, ops_path = sys.argv[1:4]
with open(ops_path) as handle:
    ops = json.load(handle)
db = semidbm.open(path, flag)
for op in ops:
    args = [bytes.fromhex(part) for part in op[1:]]
    if op[0] == "set":
        db[args[0]] = args[1]
    elif op[0] == "del":
        del db[args[0]]
    elif op[0] == "del_missing":
        try:
            del db[args[0]]
        except KeyError:
            pass
        else:
            sys.exit("0.5.1 deleted %r, which the test says is missing" % args[0])
    elif op[0] == "compact":
        db.compact()
    else:
        sys.exit("unknown operation %r" % op[0])
db.close()
"""


def apply_v051(path, flag, ops, scratch):
    """Open ``path`` with semidbm 0.5.1 (a subprocess), do ``ops``, close.

    The interpreter is ``SEMIDBM_V051_PYTHON``
    (skipped without it, failed under CI), ``PYTHONPATH`` left out.
    """
    python = v051_python()
    ops_path = Path(scratch) / "v051-ops.json"
    ops_path.write_text(json.dumps(fmt.to_json(ops)))
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    result = subprocess.run(
        [python, "-c", V051_SCRIPT, str(path), flag, str(ops_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
