#!/usr/bin/env bash
# Build the compiled kernel with AddressSanitizer and UndefinedBehaviorSanitizer
# into its own environment (.venv-asan) and run, under the sanitizers:
#   - the test suite (extra arguments go to pytest);
#   - the crash harness, SEMIDBM_KILLS kills per buffer size (default 60);
#   - the stress harness for SEMIDBM_STRESS_SECONDS seconds (default 15);
#   - the hostile-file fuzzer for SEMIDBM_FUZZ_SECONDS seconds (default 60).
# Any sanitizer report stops the process with an error, so it fails the run.
# gcc's libasan is preloaded (Python itself is not instrumented); leak
# detection is off, as the interpreter keeps its own allocations at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v gcc >/dev/null || [ ! -e "$(gcc -print-file-name=libasan.so)" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc libgcc-12-dev
fi

[ -x .venv-asan/bin/python ] || /usr/bin/python3 -m venv .venv-asan
.venv-asan/bin/python -m pip install -q --upgrade pip
.venv-asan/bin/python -m pip install -q 'pytest>=7' 'hypothesis>=6' 'Cython>=3.0' setuptools wheel

# Build from a copy of the sources, so no object file of the ordinary build is reused.
source_copy="$(mktemp -d)"
trap 'rm -rf "$source_copy"' EXIT
cp -r setup.py setup.cfg pyproject.toml README.md LICENSE MANIFEST.in src "$source_copy"/
rm -f "$source_copy"/src/semidbm/*.so "$source_copy"/src/semidbm/_core.c
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
    .venv-asan/bin/python -m pip install -q --no-build-isolation --no-deps --force-reinstall "$source_copy"

libasan="$(gcc -print-file-name=libasan.so)"
core="$(echo .venv-asan/lib/python3*/site-packages/semidbm/_core*.so)"
libraries="$(ldd "$core")"
if [[ "$libraries" != *libasan* || "$libraries" != *libubsan* ]]; then
    echo "sanitize.sh: $core is not built with the sanitizers" >&2
    exit 1
fi

export LD_PRELOAD="$libasan"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export SEMIDBM_V051_PYTHON="$PWD/.venv-v051/bin/python"
.venv-asan/bin/python -c 'import semidbm; assert semidbm.implementation == "cython", semidbm.implementation'
# Left out of the suite here: the index memory tests, which measure resident
# memory (the sanitizers' shadow memory and red zones inflate it), and the long
# random-kill and stress tests, which run below with fewer kills and seconds
# (every process start is slower under the sanitizers).
.venv-asan/bin/python -m pytest -p no:cacheprovider \
    --deselect tests/test_kernels.py::test_compiled_index_takes_at_most_32_bytes_per_key \
    --deselect tests/test_kernels.py::test_compiled_index_fits_its_keys_after_a_misleading_log \
    --deselect tests/test_crash.py::test_writer_killed_at_random_moments \
    --deselect tests/test_stress.py::test_writer_and_readers_agree_with_the_model "$@"
.venv-asan/bin/python -m tests.harness.crash --kernel cython --kills "${SEMIDBM_KILLS:-60}"
.venv-asan/bin/python -m tests.harness.stress --kernel cython --seconds "${SEMIDBM_STRESS_SECONDS:-15}"
.venv-asan/bin/python -m tests.harness.fuzz --seconds "${SEMIDBM_FUZZ_SECONDS:-60}"
