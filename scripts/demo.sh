#!/usr/bin/env bash
# Set up the environments (scripts/setup.sh) and run the demo: create a
# database, write, reopen, read, and print the implementation in use.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/demo.py
