#!/usr/bin/env bash
# Set up the environments (scripts/setup.sh) and run the whole test suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export SEMIDBM_V051_PYTHON="$PWD/.venv-v051/bin/python"
exec .venv/bin/python -m pytest "$@"
