"""The benchmark history: asv (airspeed velocity) benchmarks, timed at each commit.

asv.conf.json points asv here, not at ``benchmarks/`` itself, so that its
discovery imports only these modules and never the scripts beside this
package (``compare.py``, ``scale.py`` and their workers). Run it with
``bash scripts/nox.sh -s asv -- ARGUMENTS``; docs/performance.md, "Benchmark history (asv)",
has the commands.

- ``stores``: the four stores compared (the asv parameter) and the data;
- ``workloads``: the classic dbm workloads as asv timing benchmarks.
"""
