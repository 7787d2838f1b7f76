"""Reliability harnesses: killed writers, hostile files, stress.

Each module is a library that the test suite runs briefly and a command
for long runs (``python -m tests.harness.NAME --help`` from the
repository root); docs/RELIABILITY.md lists the commands and results.
"""
