#!/usr/bin/env bash
# Run nox, the project's task runner (sessions in noxfile.py), at the version
# pinned here, passing the arguments through:
#   bash scripts/nox.sh -s tests                  # the whole test suite
#   bash scripts/nox.sh -s bench                  # the main job, the benchmark (about a minute)
#   bash scripts/nox.sh -s bench -- --quick       # arguments after -- go to the session
#   bash scripts/nox.sh -l                        # every session
# nox comes from PyPI into its own virtual environment, .venv-nox, made on
# first use (and again when the pin changes) with Debian's python3; on a
# fresh Debian machine python3-venv is installed first with apt-get (as
# root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
version=2026.10.20
venv=.venv-nox
python=/usr/bin/python3
[ -x "$python" ] || python=python3

installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("nox"))' \
        2> /dev/null || true
}

# Every apt-get waits up to this many seconds for a lock another apt holds
# (as noxfile.py's do), rather than fail at once.
lock_timeout=600

# apt-get update, retried every 5 s while another apt holds a lock: its update
# (apt 2.6) fails at once on the package lists' lock despite DPkg::Lock::Timeout.
apt_get_update() {
    local output waited=0
    until output=$($sudo env LC_ALL=C apt-get -o "DPkg::Lock::Timeout=$lock_timeout" \
        update -q 2>&1); do
        if [[ $output != *"Could not get lock"* ]] || ((waited >= lock_timeout)); then
            printf '%s\n' "$output" >&2
            return 1
        fi
        echo "another apt holds a lock: trying apt-get update again in 5 s" >&2
        sleep 5
        waited=$((waited + 5))
    done
    printf '%s\n' "$output"
}

if [ ! -x "$venv/bin/nox" ] || [ "$(installed)" != "$version" ]; then
    if ! "$python" -c 'import ensurepip' 2> /dev/null && command -v apt-get > /dev/null; then
        sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        apt_get_update
        $sudo env DEBIAN_FRONTEND=noninteractive \
            apt-get -o "DPkg::Lock::Timeout=$lock_timeout" install -y -q python3-venv
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "nox==$version"
fi
exec "$venv/bin/nox" "$@"
