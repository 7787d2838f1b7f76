"""Helpers that several test modules share, one module per job.

Test modules import from here (``from .support.log import
records_after_start``) and never from one another: a helper that one
test module alone uses stays in that module, and fixtures that several
use are in ``tests/conftest.py``. ``tests/harness/`` holds the long
randomized runs (crashes, power cuts, fuzzing), which are also commands.
"""
