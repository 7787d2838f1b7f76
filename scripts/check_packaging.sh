#!/usr/bin/env bash
# The packaging check: build the distributions as users get them and test
# each one installed in a fresh virtual environment. .ci/run runs it; it
# takes five minutes on two idle cores, eight or nine on busy ones (the
# three suites run partly side by side). Everything happens in a temporary
# directory (removed at the end); the source tree is only read.
#
#  1. the pinned tools (scripts/packaging-requirements.txt) in their own venv;
#  2. `python -m build` on a copy of the sources: an sdist, and a wheel
#     built from that sdist; `twine check --strict` on both;
#  3. `auditwheel show`, then `auditwheel repair`: the wheel must get a
#     manylinux tag;
#  4. that wheel in a fresh venv: the whole suite with the compiled kernel
#     (scripts/test_installed.py), `mypy --strict` on examples/typed_usage.py
#     (and on code with type errors, which must fail), stubtest on the stubs,
#     and the example run;
#  5. the sdist in another fresh venv, without Cython installed there: it
#     builds (pip fetches Cython for the build only) and passes the suite;
#  6. the sdist built with SEMIDBM_NO_EXTENSIONS=1: a py3-none-any wheel,
#     installed in a third venv, passing the suite on the pure-Python kernel;
#     and built with a failing C compiler: an error that names the variable;
#  7. the cibuildwheel build identifiers for each platform and workflow job
#     (scripts/check_build_identifiers.py), and the workflow file against
#     the GitHub workflow schema.
#
# Needs Debian's python3 with venv and headers (scripts/setup.sh installs
# them) and PyPI. Set SEMIDBM_PACKAGING_KEEP=1 to keep the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
project="$PWD"
python=/usr/bin/python3
started=$SECONDS

work="$(mktemp -d -t semidbm-packaging.XXXXXX)"
# Open to all: a test runs the installed semidbm as an unprivileged user.
chmod 755 "$work"
cleanup() {
    if [ "${SEMIDBM_PACKAGING_KEEP:-}" = 1 ]; then
        echo "packaging: kept $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

step() { printf '\n=== packaging [%ds]: %s\n' "$((SECONDS - started))" "$*"; }
fail() { echo "packaging: FAILED: $*" >&2; exit 1; }
# The variables that would change what is built or tested must come from here only.
unset SEMIDBM_NO_EXTENSIONS SEMIDBM_PURE_PYTHON SEMIDBM_V051_PYTHON PYTHONPATH
export PIP_DISABLE_PIP_VERSION_CHECK=1

step "tools"
"$python" -m venv "$work/tools"
tools="$work/tools/bin"
"$tools/python" -m pip install -q -r scripts/packaging-requirements.txt

step "build an sdist and a wheel from a copy of the sources"
mkdir "$work/source"
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    # Tracked and new files, as they are now (deleted ones left out).
    git ls-files -z --cached --others --exclude-standard \
        | while IFS= read -r -d '' name; do [ ! -e "$name" ] || printf '%s\0' "$name"; done \
        | tar -c --null -T - -f - | tar -x -C "$work/source" -f -
else
    tar -c --exclude='./.venv*' --exclude='./build' --exclude='./dist' --exclude='*.egg-info' \
        --exclude='*.so' --exclude='./src/semidbm/_core.c' -f - . | tar -x -C "$work/source" -f -
fi
"$tools/python" -m build --outdir "$work/dist" "$work/source" > "$work/build.log" 2>&1 \
    || { tail -50 "$work/build.log"; fail "python -m build"; }
sdist="$(echo "$work"/dist/semidbm-*.tar.gz)"
wheel="$(echo "$work"/dist/semidbm-*.whl)"
[ -f "$sdist" ] && [ -f "$wheel" ] || fail "build made no sdist or no wheel: $(ls "$work/dist")"
echo "built $(basename "$sdist") and $(basename "$wheel")"
tar -tzf "$sdist" > "$work/sdist-files.txt"
"$tools/python" -m zipfile -l "$wheel" > "$work/wheel-files.txt"
grep -q '/src/semidbm/_core.pyx$' "$work/sdist-files.txt" || fail "the sdist lacks _core.pyx"
grep -q '/tests/fixtures/v051/' "$work/sdist-files.txt" || fail "the sdist lacks the test fixtures"
if grep -q '/src/semidbm/_core.c$' "$work/sdist-files.txt"; then fail "the sdist holds the generated _core.c"; fi
for name in py.typed __init__.pyi _core.pyi; do
    grep -q "semidbm/$name " "$work/wheel-files.txt" || fail "the wheel lacks $name"
done
"$tools/twine" check --strict "$sdist" "$wheel"

step "auditwheel"
"$tools/auditwheel" show "$wheel"
PATH="$tools:$PATH" "$tools/auditwheel" repair --wheel-dir "$work/wheelhouse" "$wheel"
repaired="$(echo "$work"/wheelhouse/semidbm-*.whl)"
[ -f "$repaired" ] || fail "auditwheel repair made no wheel"
case "$(basename "$repaired")" in
    *-manylinux_*.whl | *.manylinux_*.whl) echo "manylinux wheel: $(basename "$repaired")" ;;
    *) fail "the repaired wheel has no manylinux tag: $(basename "$repaired")" ;;
esac
"$tools/twine" check --strict "$repaired"

# A fresh venv at $1 with semidbm installed by `pip install ${@:2}`.
fresh_venv() {
    local place="$1"
    shift
    "$python" -m venv "$place"
    "$place/bin/python" -m pip install -q "$@"
}

# The suite against the install in venv $1 (test_installed.py), from its own directory.
installed_suite() {
    mkdir -p "$1-run"
    (cd "$1-run" && "$1/bin/python" "$project/scripts/test_installed.py" -q)
}

# Jobs run beside the steps in the foreground (the suites mostly wait on
# the disk): `background NAME COMMAND...` starts one, `finish NAME` waits
# for it and shows its output.
declare -A running
background() {
    local name="$1"
    shift
    ("$@") > "$work/$name.log" 2>&1 &
    running[$name]=$!
}
finish() {
    local status=0
    wait "${running[$1]}" || status=$?
    sed "s/^/[$1] /" "$work/$1.log"
    [ "$status" = 0 ] || fail "$1"
}

# The sdist installed without Cython in the venv (pip fetches it for the
# build only); the sdist built with SEMIDBM_NO_EXTENSIONS=1 into a wheel.
install_sdist() {
    fresh_venv "$work/sdist-venv" --no-cache-dir "$sdist[test]"
    if "$work/sdist-venv/bin/python" -c 'import Cython' 2> /dev/null; then
        fail "Cython is installed in the sdist venv"
    fi
}
pure_suite() {
    export SEMIDBM_NO_EXTENSIONS=1
    installed_suite "$work/pure-venv"
}
build_pure() {
    SEMIDBM_NO_EXTENSIONS=1 "$tools/python" -m pip wheel -q --no-deps --no-cache-dir \
        --wheel-dir "$work/pure" "$sdist"
    # Without it, a compiler that fails stops the install and names the variable.
    if CC=false "$tools/python" -m pip wheel -q --no-deps --no-cache-dir \
        --wheel-dir "$work/no-compiler" "$sdist" > "$work/no-compiler.log" 2>&1; then
        fail "the sdist installed although the C compiler failed"
    fi
    grep -q "or set SEMIDBM_NO_EXTENSIONS=1" "$work/no-compiler.log" \
        || { tail -30 "$work/no-compiler.log"; fail "a failed compile does not name SEMIDBM_NO_EXTENSIONS"; }
    echo "a failed compile says: set SEMIDBM_NO_EXTENSIONS=1"
}

step "the sdist installed (in the background); the wheel in a fresh venv: the suite"
background sdist-install install_sdist
background pure-build build_pure
fresh_venv "$work/wheel-venv" "$repaired[test]"
installed_suite "$work/wheel-venv"

step "the wheel: types (mypy --strict, stubtest) and the typed example"
"$work/wheel-venv/bin/python" -m pip install -q "$(grep '^mypy==' scripts/packaging-requirements.txt)"
(
    mkdir "$work/typing"
    cd "$work/typing"
    wheel_python="$work/wheel-venv/bin/python"
    "$wheel_python" -m mypy --strict --no-incremental "$project/examples/typed_usage.py"
    "$wheel_python" -m mypy.stubtest --allowlist "$project/scripts/stubtest-allowlist.txt" semidbm
    # Misuse must be caught: each of these lines is one error.
    if "$wheel_python" -m mypy --strict --no-incremental -c '
import semidbm
semidbm.open(1.5)
semidbm.open("p", "x")
db = semidbm.open("p", "c")
count: int = db[b"k"]
db[b"k"] = 5
db.keys().mapping
' > "$work/mypy-errors.txt" 2>&1; then
        fail "mypy accepted code with type errors"
    fi
    grep -q '^Found 5 errors' "$work/mypy-errors.txt" || { cat "$work/mypy-errors.txt"; fail "mypy found other errors than the five expected"; }
    "$wheel_python" "$project/examples/typed_usage.py"
)

step "SEMIDBM_NO_EXTENSIONS=1: a pure-Python wheel from the sdist, and the suite on it (in the background)"
finish pure-build
pure="$(echo "$work"/pure/semidbm-*.whl)"
case "$(basename "$pure")" in
    *-py3-none-any.whl) echo "pure wheel: $(basename "$pure")" ;;
    *) fail "SEMIDBM_NO_EXTENSIONS=1 did not give a pure wheel: $(basename "$pure")" ;;
esac
fresh_venv "$work/pure-venv" "$pure[test]"
background pure-suite pure_suite

step "the sdist in a fresh venv without Cython: it built, and passes the suite"
finish sdist-install
installed_suite "$work/sdist-venv"
finish pure-suite

step "cibuildwheel build identifiers and the workflow file"
"$tools/python" scripts/check_build_identifiers.py
"$tools/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml

step "done: all packaging checks passed in $((SECONDS - started)) s"
