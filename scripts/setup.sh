#!/usr/bin/env bash
# Prepare the development environments on a fresh Debian machine:
#   .venv       Debian's python3 (it has dbm.gnu), semidbm installed editable
#               (the compiled kernel built in place), with the test and
#               benchmark tools;
#   .venv-v051  the original pure-Python semidbm 0.5.1 from PyPI, which has
#               the same import name and so needs its own environment.
# Safe to run again: it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if ! /usr/bin/python3 -c 'import dbm.gnu, ensurepip, sysconfig, os, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
    $sudo apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        python3-gdbm python3-venv python3-dev
fi

[ -x .venv/bin/python ] || /usr/bin/python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test,bench]'

[ -x .venv-v051/bin/python ] || /usr/bin/python3 -m venv .venv-v051
.venv-v051/bin/python -m pip install -q semidbm==0.5.1
