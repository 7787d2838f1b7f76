#!/usr/bin/env bash
# Run a representative part of the test suite on the compiled kernel under
# valgrind memcheck and fail if memcheck reports any error (leaks aside) with a
# frame in the compiled kernel (tests/harness/valgrind.py reads the reports).
# Extra arguments replace the default selection of tests.
# Needs the environment of scripts/setup.sh; installs valgrind if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind
fi

selection=(
    -k "cython or corpus"
    tests/test_mapping.py
    tests/test_format.py
    tests/test_fuzz.py::test_corpus
    tests/test_concurrency.py::test_threads_sharing_one_database
    tests/test_concurrency.py::test_refresh_over_a_corrupt_record_raises_and_closes_the_reader
    tests/test_concurrency.py::test_reader_leaves_a_write_in_progress_alone
)
[ $# -eq 0 ] || selection=("$@")

reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT
# PYTHONMALLOC=malloc: every allocation goes through malloc, where memcheck sees it.
PYTHONMALLOC=malloc valgrind --tool=memcheck --leak-check=no --error-limit=no \
    --num-callers=40 --xml=yes --xml-file="$reports/memcheck.%p.xml" \
    .venv/bin/python -m pytest -q -p no:cacheprovider "${selection[@]}"
.venv/bin/python -m tests.harness.valgrind "$reports"/memcheck.*.xml
