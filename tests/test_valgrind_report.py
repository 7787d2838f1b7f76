"""The reader of memcheck reports that the nox session memcheck relies on (a check of the check)."""

import pytest

from .harness import valgrind

pytestmark = pytest.mark.tooling

REPORT = """<?xml version="1.0"?>
<valgrindoutput>
  <error>
    <kind>%s</kind>
    <stack>
      <frame><fn>memcpy</fn><obj>/usr/lib/libc.so.6</obj></frame>
      <frame><fn>__pyx_f_Store_get</fn><obj>%s</obj></frame>
    </stack>
  </error>
  <error>
    <kind>Leak_PossiblyLost</kind>
    <stack><frame><fn>malloc</fn><obj>/src/semidbm/_core.cpython-311-x86_64-linux-gnu.so</obj></frame></stack>
  </error>
</valgrindoutput>
"""


def report(tmp_path, kind, obj):
    path = tmp_path / "memcheck.1.xml"
    path.write_text(REPORT % (kind, obj))
    return [str(path)]


def test_an_error_in_the_kernel_fails(tmp_path, capsys):
    paths = report(tmp_path, "InvalidRead", "/src/semidbm/_core.cpython-311-x86_64-linux-gnu.so")
    assert valgrind.main(paths) == 1
    assert "1 of them in the compiled kernel" in capsys.readouterr().out


def test_errors_elsewhere_and_leaks_pass(tmp_path, capsys):
    assert valgrind.main(report(tmp_path, "InvalidRead", "/usr/bin/python3.11")) == 0
    assert "0 of them in the compiled kernel" in capsys.readouterr().out
