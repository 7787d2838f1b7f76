#!/usr/bin/env bash
# Run airspeed velocity (asv), the benchmark history, with the arguments
# given (README, "Benchmark history (asv)"), for example:
#   bash scripts/asv.sh run HEAD^!         # the current commit
#   bash scripts/asv.sh run HEAD~5..HEAD   # each of the last five commits
#   bash scripts/asv.sh publish            # the html report, in .asv/html
#   bash scripts/asv.sh preview            # serve it on localhost
# It sets up .venv first (scripts/setup.sh; asv comes with the bench extra)
# and describes this machine to asv without asking (asv machine --yes).
# Results and environments go to .asv/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# asv makes its environments from the python that PATH finds for the
# version wanted: Debian's, which has dbm.gnu, and not another one earlier
# on PATH (such as pyenv's) that may lack it.
export PATH="/usr/bin:$PATH"
.venv/bin/asv machine --yes > /dev/null
exec .venv/bin/asv "$@"
