"""The project's tasks, as nox sessions: ``bash scripts/nox.sh -s SESSION [-- ARGUMENTS]``.

``scripts/nox.sh`` runs the nox it pins (``bash scripts/nox.sh -l`` lists
the sessions). Arguments after ``--`` go to the session's main command.

- ``tests``: the whole suite, both kernels, on Debian's Python 3.11
  (``/usr/bin/python3``, the one with ``dbm.gnu``); the default session.
  ``quick``: the tests most related to the kernels, for between edits.
  The suites run on every processor (pytest-xdist; ``SEMIDBM_TEST_PROCESSES``
  sets how many, ``1`` runs them in pytest's own process).
- ``compiled-3.9`` ... ``compiled-3.15`` (tag ``compiled``): the suite
  on the compiled kernel (COMPILED_ONLY: ``pytest --kernel cython``, less
  the long randomized runs, the kernel's logic case by case, the
  tools' tests and those of the command and the documentation's
  examples) on each CPython the
  wheels promise: Debian's 3.11, pyenv's 3.9, 3.10, 3.12 and 3.13 (a
  missing one is an error, not a skip), and 3.14 and 3.15 from Debian
  unstable in a folder of the checkout (scripts/debian_unstable.py,
  made by the session ``debian_unstable``).
- ``bench``: the main job, ``benchmarks/compare.py`` (its arguments; by
  default its preset ``small``, written to results/bench/); ``scale``: the scale
  benchmark, ``benchmarks/scale.py``; ``bench_dask``: the Dask benchmark,
  ``benchmarks/dask_bench.py``; ``asv``: airspeed velocity with
  the arguments given.
- ``sanitize``, ``memcheck``: the reliability runs on builds of their own
  (docs/RELIABILITY.md); ``packaging``: the distributions checked as
  users get them (scripts/check_packaging.py); ``lint``: ruff and
  cython-lint; ``docs``: the documentation site, into docs/_build/html.
- ``dev``: the development environments ``.venv`` (semidbm editable,
  with the test and benchmark tools) and ``.venv-v051``, for running
  things by hand.

Environments are kept and reused (``.nox/``), so a second run is quick:
the checkout is installed again, and the compiled kernel built again,
only when its sources or the build configuration changed
(scripts/build_inputs.py). Sessions may run side by side (CI runs two at
a time, scripts/ci.py): what they share, they take turns at (``exclusive``).
The Debian packages a session needs are installed with apt-get when
missing (through sudo unless run as root).
"""

import configparser
import contextlib
import fcntl
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))

import build_inputs  # noqa: E402 (scripts/ is on the path only from the line above)
import debian_unstable  # noqa: E402

# The nox that scripts/nox.sh pins, or newer: the options below need a recent one.
nox.needs_version = ">=2026.10.20"
nox.options.sessions = ["tests"]
nox.options.reuse_venv = "yes"
# A Python that is not there fails its session rather than skip it, and
# nox must not download one.
nox.options.error_on_missing_interpreters = True
nox.options.download_python = "never"

#: Debian's own Python: it has dbm.gnu (python3-gdbm), which the suite and
#: the benchmarks compare against.
DEBIAN_PYTHON = "/usr/bin/python3"

#: Seconds between tries of an ``apt-get update`` that found the lists locked.
APT_RETRY_SECONDS = 5

#: What building and testing on Debian's Python needs.
DEBIAN_PACKAGES = ["gcc", "python3-dev", "python3-gdbm", "python3-venv"]

#: The CPython versions taken from pyenv.
PYENV_VERSIONS = ["3.9", "3.10", "3.12", "3.13"]

#: The environment of semidbm 0.5.1 from PyPI (it has our import name).
V051_VENV = ROOT / ".venv-v051"

#: The environment of pyenv's Python 3.13, which runs the benchmark's dbm.sqlite3.
SQLITE3_VENV = ROOT / ".venv-sqlite3"

#: The tests of the session ``quick``: the kernels' behaviour (the mapping,
#: the dbm contract, the format and records, both kernels side by side, the
#: index and its file, bulk operations, batches, views, the write path,
#: opening, threads and interference), both kernels: about half a minute
#: on two processors, for between edits. The rest (the command, shelves,
#: the harnesses, the documentation's examples, the benchmarks' scripts)
#: is the whole suite's.
QUICK_SELECTION = [
    "tests/" + name + ".py"
    for name in (
        "test_mapping", "test_dbm_contract", "test_format", "test_records", "test_kernels",
        "test_index", "test_index_file", "test_bulk", "test_batch", "test_views",
        "test_write_path", "test_open", "test_core_constants", "test_implementation",
        "test_concurrency", "test_interference",
    )
]

#: The test modules that start a Python process for nearly every case: the
#: command's and the documentation's examples. They reach the kernel through
#: the API that the other tests call directly, and took nearly half the time
#: of the other Pythons' compiled-kernel runs, which leave them out
#: (COMPILED_ONLY), as the sanitizers do (SANITIZE_LEFT_OUT): they run in the
#: whole suite and, installed, in the packaging check, on Debian's Python 3.11.
PROCESS_STARTING = ["tests/test_cli.py", "tests/test_cli_import.py", "tests/test_examples.py"]

#: The compiled-kernel selection of the suite (tests/conftest.py) that runs
#: on each Python: the tests of what differs between Pythons, the C API at
#: the kernel's edge and the Python code. Left out: the long randomized
#: runs (marked ``slow``: kills, stress, power cuts, fuzzing, a 4 GiB file)
#: and the kernel's logic case by case (marked ``kernel_logic``: the index
#: file's trust, crashes, hostile files, a model), which test the same C
#: on every Python and run in the whole suite (``tests``, Debian's 3.11)
#: and under the sanitizers on every CI run; and the tests of the
#: repository's tools (``tooling``: the CI runner, the benchmarks), which
#: run where the tools run, in the whole suite. Left out too: the tests of
#: the command and of the documentation's examples (PROCESS_STARTING).
COMPILED_ONLY = [
    "--kernel", "cython", "-m", "not slow and not kernel_logic and not tooling",
    *("--ignore=" + module for module in PROCESS_STARTING),
]

#: Fails, saying which kernel it got, unless semidbm runs its compiled kernel.
CHECK_COMPILED = (
    "import semidbm; assert semidbm.implementation == 'cython', "
    "'semidbm.implementation is ' + semidbm.implementation"
)

#: The suite's selection that memcheck runs by default: the compiled kernel
#: on the mapping, format, records (the tools' examination), sorted lines (but the
#: 2**17 keys, minutes under valgrind, and the random keys' lines in the forms
#: other than plain keys: 40 s each there, the same sort; the sanitizers run
#: them), fuzz corpus and concurrency tests.
MEMCHECK_SELECTION = [
    "-k",
    "(cython or corpus) and not branching_at_every_byte and not (each_form and (dump or encoded))",
    "tests/test_mapping.py",
    "tests/test_format.py",
    "tests/test_records.py",
    "tests/test_sorted_lines.py",
    "tests/test_fuzz.py::test_corpus",
    "tests/test_concurrency.py::test_threads_sharing_one_database",
    "tests/test_concurrency.py::test_refresh_over_a_corrupt_record_raises_and_closes_the_reader",
    "tests/test_concurrency.py::test_reader_leaves_a_write_in_progress_alone",
]

#: Test modules left out under the sanitizers, besides the tools' (marked
#: ``tooling``): those that run the kernel in processes they start
#: (PROCESS_STARTING's, and Dask's, a cluster's workers), each start slow
#: under the sanitizers, through kernel paths that the tests calling the
#: kernel directly cover (sorted lines, the summary, parts).
SANITIZE_LEFT_OUT = [*PROCESS_STARTING, "tests/test_dask.py"]

#: Left out of the suite under the sanitizers: the index memory tests, which
#: measure resident memory (the sanitizers' shadow memory and red zones
#: inflate it).
SANITIZE_DESELECTED = [
    "tests/test_kernels.py::test_compiled_index_takes_at_most_32_bytes_per_key",
    "tests/test_kernels.py::test_compiled_index_fits_its_keys_after_a_misleading_log",
]

#: The markers of the suite's run under the sanitizers: not the tools' tests,
#: which run none of the kernel's code that the others do not, nor the long
#: randomized runs (``slow``: kills, stress, power cuts, lock probes, models;
#: every process start is slower there), whose short variants run, and after
#: which the session runs the crash, stress and fuzz harnesses, with fewer
#: kills and seconds; but the 4 GiB file's offsets (``large_file``) do run.
SANITIZE_MARKERS = "not tooling and (not slow or large_file)"

#: Where the sessions keep the locks of what they share (noxfile's ``exclusive``).
LOCKS = ROOT / ".nox" / "locks"

#: The file, in a session's environment, naming the build inputs of the
#: compiled kernel it was installed from (scripts/build_inputs.py).
BUILD_STAMP = "semidbm-build-inputs"

#: The linters, pinned: a new release with new rules must not fail CI by itself.
LINTERS = ["ruff==0.17.6", "cython-lint==0.22.1"]


# --- helpers ---------------------------------------------------------------


def debian_packages(session, *extra):
    """Install whichever of DEBIAN_PACKAGES and ``extra`` are missing, with apt-get.

    As root, or through sudo. On a system without dpkg it only warns:
    there, the packages' equivalents must be installed by hand. Each
    apt-get waits for a lock that another apt holds rather than fail
    (``debian_unstable.APT_WAIT``, and ``apt_get_update``).
    """
    wanted = DEBIAN_PACKAGES + list(extra)
    if shutil.which("dpkg-query") is None:
        session.warn("not a Debian system: make sure the equivalents of %s are installed" % wanted)
        return
    missing = [package for package in wanted if not debian_package_installed(package)]
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    apt_get_update(session, sudo)
    session.run(
        *sudo, "env", "DEBIAN_FRONTEND=noninteractive",
        "apt-get", *debian_unstable.APT_WAIT, "install", "-y", "-q", *missing, external=True,
    )


def apt_get_update(session, sudo):
    """Run ``apt-get update`` (through ``sudo`` if given), waiting for another apt to finish.

    apt-get waits for dpkg's lock when told to (``APT_WAIT``), but its
    update (apt 2.6, Debian 12) still fails at once while another apt
    holds the lock of the package lists. So a failure that names a lock
    is retried every APT_RETRY_SECONDS, for as long as APT_WAIT lets an
    install wait; any other failure ends the session at once.
    """
    command = [*sudo, "env", "LC_ALL=C", "apt-get", *debian_unstable.APT_WAIT, "update", "-q"]
    deadline = time.monotonic() + debian_unstable.APT_LOCK_TIMEOUT
    while True:
        session.log(" ".join(command))
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(done.stdout, end="", flush=True)
        if done.returncode == 0:
            return
        if "Could not get lock" not in done.stdout or time.monotonic() > deadline:
            session.error("apt-get update failed (exit status %d)" % done.returncode)
        session.log("another apt holds a lock: trying again in %d s" % APT_RETRY_SECONDS)
        time.sleep(APT_RETRY_SECONDS)


def debian_package_installed(package):
    """True if dpkg has the Debian package ``package`` installed."""
    status = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}", package], capture_output=True, text=True
    )
    return status.stdout.endswith(" installed")


def v051_python(session):
    """The interpreter of ``.venv-v051``, with semidbm 0.5.1; made on first use.

    Under a lock: sessions running side by side (CI) share it.
    """
    python = V051_VENV / "bin" / "python"
    with exclusive("v051"):
        if not python.exists():
            session.run(DEBIAN_PYTHON, "-m", "venv", str(V051_VENV), external=True)
        if not list(V051_VENV.glob("lib/python*/site-packages/semidbm-0.5.1.dist-info")):
            session.run(str(python), "-m", "pip", "install", "-q", "semidbm==0.5.1",
                        external=True)
    return str(python)


def sqlite3_python(session):
    """The interpreter of ``.venv-sqlite3``, made from pyenv's Python 3.13 on first use, or None.

    It runs the benchmark's dbm.sqlite3 contender: that module is new in
    3.13, and the benchmark runs on Debian's 3.11 (for dbm.gnu). Without
    pyenv's 3.13 it warns and returns None; the benchmark's report then
    says that dbm.sqlite3 was not run, and why.
    """
    python = SQLITE3_VENV / "bin" / "python"
    if not python.exists():
        base = pyenv_python("3.13")
        if not os.access(base, os.X_OK):
            session.warn("pyenv has no Python 3.13 (%s): dbm.sqlite3 will not run" % base)
            return None
        session.run(base, "-m", "venv", "--clear", str(SQLITE3_VENV), external=True)
    return str(python)


def pyenv_root():
    """pyenv's directory: ``$PYENV_ROOT``, else what ``pyenv root`` says, else ``~/.pyenv``."""
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    if shutil.which("pyenv"):
        answer = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        if answer.returncode == 0 and answer.stdout.strip():
            return Path(answer.stdout.strip())
    return Path.home() / ".pyenv"


def pyenv_python(version):
    """The interpreter of pyenv's newest CPython ``version`` (X.Y).

    If pyenv has none, the path it would have, so that nox reports that
    interpreter missing (and fails the session).
    """
    versions = pyenv_root() / "versions"
    releases = [
        path.name
        for path in versions.glob(version + ".*")
        if re.fullmatch(re.escape(version) + r"\.\d+", path.name)
    ]
    newest = max(releases, key=lambda name: int(name.rsplit(".", 1)[1]), default=version + ".N")
    return str(versions / newest / "bin" / ("python" + version))


@contextlib.contextmanager
def exclusive(name):
    """Hold the lock ``name`` (a file under LOCKS) for the block, waiting for it if need be.

    For what sessions running side by side (CI runs two at a time) share:
    the build in the checkout, semidbm 0.5.1's environment, the Debian
    unstable folder. A lock taken again in the same process waits forever:
    take each in one place.
    """
    LOCKS.mkdir(parents=True, exist_ok=True)
    with open(LOCKS / (name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def install_checkout(session, *extras):
    """Install the checkout editable, with ``extras``; pip builds the compiled kernel in place.

    Skipped when this environment was installed from the same build inputs
    (scripts/build_inputs.py: the compiled kernel's sources, the build
    configuration, the package's files) with the same extras, and the
    compiled kernel in the checkout was built from them too (another
    session of the same Python may have built it since): a second run of a
    session does not build again, and a change to any of those rebuilds. The
    build runs under a lock, as it writes in the checkout (the generated C,
    ``build/``, the extension in ``src/semidbm``): sessions running side by
    side take turns. setup.py renames the new extension over the old one,
    so that a process that has the old one loaded keeps it whole.
    """
    stamp = Path(session.virtualenv.location) / BUILD_STAMP
    suffix = session_python_tag(session)
    with exclusive("build"):
        if build_inputs.up_to_date(stamp, ROOT, extras, suffix):
            session.log("semidbm: no build input changed since this environment's install "
                        "and the build beside it: not built again")
            return
        taken = build_inputs.digests(ROOT, extras)
        session.install("-e", ".[%s]" % ",".join(extras) if extras else ".")
        build_inputs.record(stamp, ROOT, suffix, taken)


def session_python_tag(session):
    """The extension suffix of the session's Python (``.cpython-311-x86_64-linux-gnu.so``).

    Asked with ``run_install``, which ``--install-only`` runs too (``run``
    returns None there), else with ``run``, which ``-R`` (no install) runs
    where it skips ``run_install``.
    """
    command = ("python", "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    found = session.run_install(*command, silent=True)
    if found is None:
        found = session.run(*command, silent=True)
    return found.strip()


def test_processes():
    """pytest-xdist's ``-n`` for the suite: ``SEMIDBM_TEST_PROCESSES``, else one per processor.

    ``1`` runs the tests in pytest's own process (CI's runner sets it, as
    it runs two sessions at once).
    """
    wanted = os.environ.get("SEMIDBM_TEST_PROCESSES", "auto")
    return ["-n", "0" if wanted == "1" else wanted]


def run_suite(session, *arguments):
    """Run pytest on the suite with ``arguments``, spread over processes, semidbm 0.5.1 at hand."""
    session.run(
        "python", "-m", "pytest", *test_processes(), *arguments,
        env={"SEMIDBM_V051_PYTHON": v051_python(session)},
    )


def test_extras(version):
    """The extras a compiled-kernel session installs on CPython ``version``.

    Dask (``semidbm.dask``'s tests) on the newest alone: the part is
    Python over the kernel's API, likeliest to meet a change of Python
    there, and its stack (Dask, pandas, NumPy, pyarrow) took 25 to 40 s to
    fetch and install in each session; the whole suite runs those tests
    on Debian's 3.11. Elsewhere they skip, saying Dask is missing.
    """
    newest = max(debian_unstable.VERSIONS, key=version_key)
    return ("test", "dask") if version == newest else ("test",)


def compiled_on_this_machine(session):
    """The compiled-kernel selection of the suite on this Python; arguments go to pytest."""
    debian_packages(session)
    install_checkout(session, *test_extras(session.name.split("-", 1)[1]))
    session.run("python", "-c", CHECK_COMPILED)
    run_suite(session, *COMPILED_ONLY, *session.posargs)


def compiled_in_debian_unstable(session, version):
    """The compiled-kernel selection on Debian unstable's Python ``version``, in its folder.

    Arguments go to pytest.
    """
    with exclusive("debian-unstable"):
        debian_unstable.make_folder(session, debian_packages)
        python = debian_unstable.venv_python(session, "python" + version, "python" + version)
        v051 = debian_unstable.v051_python(session)
    with exclusive("build"):
        debian_unstable.run_inside(
            session, python, "-m", "pip", "install", "-q", "-e",
            ".[%s]" % ",".join(test_extras(version)),
        )
    debian_unstable.run_inside(session, python, "-c", CHECK_COMPILED)
    debian_unstable.run_inside(
        session, python, "-m", "pytest", *test_processes(), *COMPILED_ONLY, *session.posargs,
        env={"SEMIDBM_V051_PYTHON": v051},
    )


def test_requirements():
    """The test extra's requirements, as setup.cfg lists them."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return setup["options.extras_require"]["test"].split()


def build_requirements():
    """The build requirements of pyproject.toml (setuptools and Cython)."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["build-system"]["requires"]


def install_sanitized_build(session):
    """Build the checkout with the sanitizers into the session's environment.

    From a copy of the sources (no object file of an ordinary build is
    reused), without build isolation (the build requirements are
    installed already), replacing any earlier install.
    """
    flags = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
    with tempfile.TemporaryDirectory(prefix="semidbm-sanitize-") as source:
        for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md", "LICENSE",
                     "MANIFEST.in"):
            shutil.copy(ROOT / name, source)
        shutil.copytree(
            ROOT / "src",
            os.path.join(source, "src"),
            ignore=shutil.ignore_patterns("*.so", "*.new", "*.inputs", "_core.c", "*.egg-info",
                                          "__pycache__"),
        )
        session.run(
            "python", "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
            "--force-reinstall", source,
            env={"CFLAGS": flags, "LDFLAGS": "-fsanitize=address,undefined"},
        )


# --- the test suite ----------------------------------------------------------


@nox.session(python=DEBIAN_PYTHON)
def tests(session):
    """The whole suite, both kernels, on Debian's Python; arguments go to pytest."""
    debian_packages(session)
    install_checkout(session, "test", "dask")
    run_suite(session, *session.posargs)


@nox.session(python=DEBIAN_PYTHON)
def quick(session):
    """The tests most related to the kernels (QUICK_SELECTION), both kernels; arguments to pytest.

    For between edits: under a minute once set up (a change to the
    compiled kernel's sources rebuilds it first). The whole suite is
    ``tests``.
    """
    debian_packages(session)
    install_checkout(session, "test")
    run_suite(session, *QUICK_SELECTION, *session.posargs)


def register_compiled_sessions():
    """One ``compiled-X.Y`` session per CPython version, tagged ``compiled``."""
    local = {version: pyenv_python(version) for version in PYENV_VERSIONS}
    local["3.11"] = DEBIAN_PYTHON
    for version, python in sorted(local.items(), key=lambda item: version_key(item[0])):
        nox.session(name="compiled-" + version, python=python, tags=["compiled"])(
            compiled_on_this_machine
        )
    for version in debian_unstable.VERSIONS:
        nox.session(name="compiled-" + version, python=False, tags=["compiled"])(
            unstable_session(version)
        )


def unstable_session(version):
    """The session function of ``compiled-VERSION`` for a Python of Debian unstable."""

    def compiled(session):
        compiled_in_debian_unstable(session, version)

    compiled.__doc__ = compiled_in_debian_unstable.__doc__.replace("``version``", version)
    return compiled


def version_key(version):
    """``"3.10"`` as ``(3, 10)``, to sort versions as numbers."""
    return tuple(int(part) for part in version.split("."))


register_compiled_sessions()


@nox.session(python=False)
def debian_unstable_folder(session):
    """Make the Debian unstable folder for Python 3.14 and 3.15, or bring it up to date."""
    with exclusive("debian-unstable"):
        debian_unstable.make_folder(session, debian_packages)


# --- reliability -------------------------------------------------------------


@nox.session(python=DEBIAN_PYTHON)
def sanitize(session):
    """The suite's compiled-kernel runs, the crash, stress and fuzz harnesses under ASan and UBSan.

    The suite's selection there is SANITIZE_MARKERS's, less
    SANITIZE_LEFT_OUT's modules and SANITIZE_DESELECTED's tests.

    The compiled kernel is built with ``-fsanitize=address,undefined``
    from a copy of the sources (no object file of an ordinary build is
    reused) into this session's environment. Any sanitizer report stops
    the process with an error, which fails the run. gcc's libasan is
    preloaded (the interpreter itself is not instrumented); leak
    detection is off, as the interpreter keeps its own allocations at
    exit. Arguments go to pytest. ``SEMIDBM_KILLS`` (kills per buffer
    size, default 60), ``SEMIDBM_STRESS_SECONDS`` (15) and
    ``SEMIDBM_FUZZ_SECONDS`` (60) size the harness runs.
    """
    debian_packages(session)
    libasan = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.isabs(libasan):
        session.error("gcc has no libasan.so (Debian: libgcc-N-dev, which gcc depends on)")
    session.install(*test_requirements(), *build_requirements(), "wheel")
    install_sanitized_build(session)
    core = glob.glob(os.path.join(session.virtualenv.location, "lib", "python3*", "site-packages",
                                  "semidbm", "_core*.so"))
    libraries = subprocess.run(["ldd", *core], capture_output=True, text=True).stdout
    if len(core) != 1 or "libasan" not in libraries or "libubsan" not in libraries:
        session.error("the compiled kernel %s is not built with the sanitizers" % core)

    sanitized = {
        "LD_PRELOAD": libasan,
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:strict_string_checks=1"
        ":check_initialization_order=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        "SEMIDBM_V051_PYTHON": v051_python(session),
    }
    session.run(
        "python", "-c",
        "import semidbm; assert semidbm.implementation == 'cython', semidbm.implementation",
        env=sanitized,
    )
    deselected = [argument for test in SANITIZE_DESELECTED for argument in ("--deselect", test)]
    deselected += ["--ignore=" + module for module in SANITIZE_LEFT_OUT]
    # The compiled kernel's runs (--kernel cython, the tests of both kernels
    # side by side among them): the pure kernel's own runs execute no
    # instrumented code (the interpreter is not built with the sanitizers).
    session.run(
        "python", "-m", "pytest", "-p", "no:cacheprovider", *test_processes(), "--kernel",
        "cython", "-m", SANITIZE_MARKERS, *deselected, *session.posargs, env=sanitized,
    )
    kills = os.environ.get("SEMIDBM_KILLS", "60")
    seconds = os.environ.get("SEMIDBM_STRESS_SECONDS", "15")
    fuzz_seconds = os.environ.get("SEMIDBM_FUZZ_SECONDS", "60")
    for workload in ("default", "batch"):
        session.run("python", "-m", "tests.harness.crash", "--kernel", "cython", "--kills", kills,
                    "--workload", workload, env=sanitized)
    session.run("python", "-m", "tests.harness.stress", "--kernel", "cython", "--seconds", seconds,
                env=sanitized)
    session.run("python", "-m", "tests.harness.fuzz", "--seconds", fuzz_seconds, env=sanitized)


@nox.session(python=DEBIAN_PYTHON)
def memcheck(session):
    """Part of the suite, on the compiled kernel, under valgrind memcheck.

    Fails if memcheck reports any error (leaks aside) with a frame in the
    compiled kernel (tests/harness/valgrind.py reads the reports).
    Arguments replace the default selection of tests (MEMCHECK_SELECTION).
    """
    debian_packages(session, "valgrind")
    install_checkout(session, "test")
    reports = tempfile.mkdtemp(prefix="semidbm-memcheck-")
    try:
        # PYTHONMALLOC=malloc: every allocation goes through malloc, where memcheck sees it.
        session.run(
            "valgrind", "--tool=memcheck", "--leak-check=no", "--error-limit=no",
            "--num-callers=40", "--xml=yes",
            "--xml-file=" + os.path.join(reports, "memcheck.%p.xml"),
            os.path.join(session.bin, "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
            *(session.posargs or MEMCHECK_SELECTION),
            env={"PYTHONMALLOC": "malloc"}, external=True,
        )
        session.run(
            "python", "-m", "tests.harness.valgrind",
            *sorted(glob.glob(os.path.join(reports, "memcheck.*.xml"))),
        )
    finally:
        shutil.rmtree(reports)


# --- benchmarks ----------------------------------------------------------------


@nox.session(python=DEBIAN_PYTHON)
def bench(session):
    """The main job: semidbm side by side with the others (benchmarks/compare.py).

    Arguments go to compare.py; without any, its preset ``small`` (about
    a minute), the report and charts written to a new directory under
    results/bench/ (ignored by git) and a summary to the terminal.
    Examples: ``-- --preset a`` (1,000,000 keys), ``-- --preset all
    --out-dir docs/bench`` (every preset, published), ``-- --preset all
    --quick --out-dir /tmp/bench`` (a smoke test). dbm.sqlite3 runs on
    ``.venv-sqlite3``, made from pyenv's Python 3.13 (without one, the
    report says it was not run).
    """
    debian_packages(session)
    install_checkout(session, "bench")
    environment = {"SEMIDBM_V051_PYTHON": v051_python(session)}
    sqlite3 = sqlite3_python(session)
    if sqlite3:
        environment["SEMIDBM_SQLITE3_PYTHON"] = sqlite3
    session.run("python", "benchmarks/compare.py", *session.posargs, env=environment)


@nox.session(python=DEBIAN_PYTHON)
def scale(session):
    """The scale benchmark (benchmarks/scale.py; docs/scale.md); arguments go to it."""
    debian_packages(session)
    install_checkout(session)
    session.run("python", "benchmarks/scale.py", *session.posargs)


@nox.session(python=DEBIAN_PYTHON)
def bench_dask(session):
    """The Dask benchmark of issue 31 (benchmarks/dask_bench.py); arguments go to it.

    Without any: 10,000,000 records on a LocalCluster of 2 worker
    processes (the machine idle, to mean anything), the report and chart
    written to a new directory under results/dask/. ``-- --records
    200000`` is a quick look.
    """
    debian_packages(session)
    install_checkout(session, "bench", "dask")
    session.run("python", "benchmarks/dask_bench.py", *session.posargs)


@nox.session(python=DEBIAN_PYTHON)
def asv(session):
    """airspeed velocity, the benchmark history, with the arguments given.

    For example ``-- run HEAD^!`` (the current commit), ``-- publish``,
    ``-- preview``; docs/performance.md, "Benchmark history (asv)". It describes this
    machine to asv first, without asking (``asv machine --yes``). asv
    makes its environments from the ``python3.X`` that ``PATH`` finds
    first: this session's, made from Debian's Python (which has
    dbm.gnu). Results and environments go to .asv/.
    """
    debian_packages(session)
    install_checkout(session, "bench")
    if not session.posargs:
        session.error("give asv's arguments after --, for example: -- run HEAD^!")
    session.run("asv", "machine", "--yes", silent=True)
    session.run("asv", *session.posargs)


@nox.session(python=False)
def crc_arm(session):
    """The compiled kernel's CRC-32 on 64-bit ARM, under an emulator (tests/harness/crc_check.c).

    The suite checks the ways of CRC-32 its own processor has
    (tests/test_crc32.py). This builds the same check for ARMv8 with
    Debian's cross compilers, GCC and clang (which reach the CRC32
    instructions differently: crc32.h), each with the instructions found
    at run time (``armv8-a``) and known at compile time (``armv8-a+crc``),
    and runs each under ``qemu-aarch64``, whose processor has them: each
    must take the way "armv8" and agree with CRC-32 a bit at a time.
    """
    debian_packages(
        session, "gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "qemu-user", "clang"
    )
    compilers = {"gcc": ["aarch64-linux-gnu-gcc"], "clang": ["clang", "--target=aarch64-linux-gnu"]}
    with tempfile.TemporaryDirectory() as place:
        for name, compiler in compilers.items():
            for architecture in ("armv8-a", "armv8-a+crc"):
                program = os.path.join(place, "crc_check-%s-%s" % (name, architecture))
                session.run(
                    *compiler, "-O2", "-Wall", "-Werror", "-static", "-march=" + architecture,
                    "-I", "src/semidbm", "tests/harness/crc_check.c", "-o", program,
                    external=True,
                )
                session.run("qemu-aarch64", program, "armv8", external=True)


# --- the documentation site ------------------------------------------------------


@nox.session(python=DEBIAN_PYTHON)
def docs(session):
    """The documentation site (docs/), built with warnings as errors; arguments go to sphinx-build.

    HTML into ``docs/_build/html`` with every cross-reference checked
    (``-n``), then the doctest builder, which runs the docstrings'
    examples. The checkout is installed without building the compiled
    kernel (``SEMIDBM_NO_EXTENSIONS``), whose build it does not need: every
    name the reference documents is Python code, the same on either kernel.
    Python's own inventory for the links to the standard library comes
    from Debian's python3.11-doc, as this machine has no internet
    (docs/conf.py). The pages' code blocks are tests of the suite
    (tests/test_examples.py).
    """
    debian_packages(session, "python3.11-doc")
    with exclusive("build"):  # it writes the checkout's egg-info, as every editable install does
        session.install("-e", ".", env={"SEMIDBM_NO_EXTENSIONS": "1"})
    session.install("-r", "docs/requirements.txt")
    build = ["sphinx-build", "-W", "--keep-going", "-n", "-q", "-d", "docs/_build/doctrees"]
    session.run(*build, "-b", "html", *session.posargs, "docs", "docs/_build/html")
    session.run(*build, "-b", "doctest", *session.posargs, "docs", "docs/_build/doctest")


# --- packaging and lint --------------------------------------------------------


@nox.session(python=DEBIAN_PYTHON)
def packaging(session):
    """The distributions checked as users get them (scripts/check_packaging.py).

    The pinned tools (scripts/packaging-requirements.txt) go in this
    session's environment; fresh environments for the installs are made
    with Debian's Python. Set ``SEMIDBM_PACKAGING_KEEP=1`` to keep the
    temporary directory.
    """
    debian_packages(session)
    session.install("-r", "scripts/packaging-requirements.txt")
    session.run("python", "scripts/check_packaging.py", DEBIAN_PYTHON)


@nox.session(python=DEBIAN_PYTHON)
def lint(session):
    """ruff on the Python code, cython-lint on the Cython kernel (settings in pyproject.toml)."""
    session.install(*LINTERS)
    session.run("ruff", "check", *session.posargs)
    cython_files = sorted(
        name
        for folder in ("", build_inputs.PIECES)
        for pattern in ("*.pyx", "*.pxd", "*.pxi")
        for name in glob.glob(os.path.join("src", "semidbm", folder, pattern))
    )
    session.run("cython-lint", *cython_files)


# --- by hand -------------------------------------------------------------------


@nox.session(python=False)
def dev(session):
    """The development environments, to run things by hand.

    ``.venv``: Debian's Python, semidbm installed editable (the compiled
    kernel built in place; run this again after changing ``_core.pyx``)
    with the test and benchmark tools; ``.venv-v051``: semidbm 0.5.1, for
    ``SEMIDBM_V051_PYTHON``. Then, for example:
    ``SEMIDBM_V051_PYTHON=$PWD/.venv-v051/bin/python .venv/bin/python -m pytest``.
    """
    debian_packages(session)
    venv = ROOT / ".venv"
    if not (venv / "bin" / "python").exists():
        session.run(DEBIAN_PYTHON, "-m", "venv", str(venv), external=True)
    python = str(venv / "bin" / "python")
    with exclusive("build"):
        session.run(python, "-m", "pip", "install", "-q", "-e", ".[test,bench]", external=True)
    v051_python(session)
