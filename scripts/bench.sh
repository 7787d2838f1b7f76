#!/usr/bin/env bash
# The main job: set up the environments (scripts/setup.sh: Debian's Python,
# which has dbm.gnu, with lmdb, sqlitedict and matplotlib; semidbm 0.5.1 in
# its own venv), then run the side-by-side benchmark, benchmarks/compare.py.
# With no arguments: preset a (1,000,000 keys, 5 interleaved repetitions),
# its report and charts written to docs/bench/. Arguments go to compare.py
# instead, e.g. `--preset all --out-dir docs/bench` or `--quick`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ $# -gt 0 ] || set -- --preset a --out-dir docs/bench
exec .venv/bin/python benchmarks/compare.py "$@"
