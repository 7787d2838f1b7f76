"""The packaging check: build the distributions as users get them and test each one installed.

The nox session ``packaging`` runs it, with the pinned tools of
scripts/packaging-requirements.txt installed beside the interpreter that
runs this script; its one argument is the Python that makes the fresh
virtual environments (Debian's, with venv and the headers). It takes
about three minutes beside another CI phase on two cores (the three
installs' tests run partly side by side). Everything happens in a temporary
directory, removed at the end unless ``SEMIDBM_PACKAGING_KEEP=1``; the
source tree is only read.

1. ``python -m build`` on a copy of the sources: an sdist, and a wheel
   built from that sdist; ``twine check --strict`` on both;
2. ``auditwheel show``, then ``auditwheel repair``: the wheel must get a
   manylinux tag;
3. that wheel in a fresh venv: the installed selection of the suite
   (``INSTALLED_SELECTION``, with scripts/test_installed.py) on both
   kernels, ``mypy --strict`` on examples/typed_usage.py (and on code
   with type errors, which must fail), stubtest on the typed modules, and the
   example run;
4. the sdist in another fresh venv, without Cython installed there: it
   builds (pip fetches Cython for the build only) and passes a smaller
   selection (``BUILT_SELECTION``: what it built runs);
5. the sdist built with ``SEMIDBM_NO_EXTENSIONS=1``: a py3-none-any
   wheel, installed in a third venv, passing ``BUILT_SELECTION`` on
   the pure-Python kernel alone; and built with a failing C compiler: an
   error that names the variable;
6. the cibuildwheel build identifiers for each platform and workflow job
   (scripts/check_build_identifiers.py), and the workflow file against
   the GitHub workflow schema;
7. README's install instructions as a reader runs them (``readme_install``):
   in another copy of the sources, as a clone, with a fresh venv first on
   ``PATH``, the commands of its Install section's ``sh`` blocks that say
   this session checks them (``pip install .``), then its version
   transcript (``python -c ...`` and what it prints), which must print
   what README shows.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

#: The pinned tools, installed beside this script's interpreter.
TOOLS = Path(sys.executable).parent

#: The variables that would change what is built or tested: only this script sets them.
LEFT_OUT = ["SEMIDBM_NO_EXTENSIONS", "SEMIDBM_PURE_PYTHON", "SEMIDBM_V051_PYTHON", "PYTHONPATH"]

#: Code that misuses the typed API: mypy must find exactly six errors in it.
MISUSE = """
import semidbm
semidbm.open(1.5)
semidbm.open("p", "x")
db = semidbm.open("p", "c")
count: int = db[b"k"]
db[b"k"] = 5
db.keys().mapping
semidbm.open_shelf("p", serializer="yaml")
"""

#: The tests run on the wheel's install. What an install adds over the
#: whole suite on the checkout (which CI runs on every Python) is what the
#: distribution holds: every module of the package imported by both
#: kernels' runs, the ``semidbm`` command and ``python -m semidbm``
#: (test_cli, both ways), the types (mypy and stubtest, below), and what
#: the kernels do with the install's own files (the mapping and dbm
#: contract, shelves, every example of the documentation, the kernel the
#: install chose). How each kernel behaves does not depend on how it was
#: installed: the rest of the suite, which tests that, runs on the checkout.
INSTALLED_SELECTION = [
    "tests/" + name + ".py"
    for name in (
        "test_implementation", "test_cli", "test_cli_import", "test_mapping",
        "test_dbm_contract", "test_shelf", "test_examples",
    )
]

#: The tests run on the two other installs, the sdist built where Cython
#: is not installed and the pure-Python wheel: that what their builds made
#: runs (the kernel the install chose, the mapping, the dbm contract).
#: What the distribution holds the wheel's run shows, as that wheel is
#: built from the same sdist.
BUILT_SELECTION = [
    "tests/" + name + ".py"
    for name in ("test_implementation", "test_mapping", "test_dbm_contract")
]

STARTED = time.monotonic()


class Failure(Exception):
    """A check that failed; its message says which."""


def step(message):
    print("\n=== packaging [%ds]: %s" % (time.monotonic() - STARTED, message), flush=True)


def run(*command, **options):
    """Run ``command``; a non-zero exit is a Failure naming it."""
    result = subprocess.run([str(part) for part in command], **options)
    if result.returncode != 0:
        raise Failure("%s exited with %d" % (" ".join(map(str, command)), result.returncode))
    return result


def only(pattern):
    """The one file matching ``pattern``; a Failure if there is none or more."""
    found = glob.glob(str(pattern))
    if len(found) != 1:
        raise Failure("expected one file for %s, found %s" % (pattern, found))
    return Path(found[0])


#: The mark of README's install blocks that this script runs (their last line says so).
CHECKED_HERE = "the packaging session checks it"


def install_section(readme):
    """README's Install section: from its heading to the next heading of that level."""
    found = re.search(r"^## Install\n(.*?)(?=^## )", readme, re.M | re.S)
    if found is None:
        raise Failure("README.md has no Install section")
    return found.group(1)


def readme_install(readme):
    """README's install instructions: ``(commands, transcript)``.

    The commands are the lines of the Install section's ``sh`` blocks
    that carry CHECKED_HERE, comments left out; the transcript is the
    ``(command, output)`` pairs of its ``console`` blocks (``$ COMMAND``
    and the lines it prints).
    """
    section = install_section(readme)
    commands, transcript = [], []
    for language, body in re.findall(r"^```(\w+)\n(.*?)^```$", section, re.M | re.S):
        lines = body.splitlines()
        if language == "sh" and any(CHECKED_HERE in line for line in lines):
            commands += [line for line in lines if line.strip() and not line.startswith("#")]
        elif language == "console":
            for line in lines:
                if line.startswith("$ "):
                    transcript.append((line[2:], []))
                elif transcript:
                    transcript[-1][1].append(line)
    if not commands or not transcript:
        raise Failure("README's Install section has no checked commands or no transcript")
    return commands, [(command, "\n".join(output)) for command, output in transcript]


def copy_sources(target):
    """Copy the sources to ``target``: git's tracked and new files as they are, or the tree."""
    listed = subprocess.run(
        ["git", "-C", str(PROJECT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
    )
    if listed.returncode != 0:
        shutil.copytree(
            PROJECT,
            target,
            ignore=shutil.ignore_patterns(
                ".venv*", ".nox", ".debian-unstable*", "build", "dist", "*.egg-info", "*.so",
                "_core.c", ".git",
            ),
        )
        return
    for name in os.fsdecode(listed.stdout).split("\0"):
        source = PROJECT / name
        if name and source.is_file():  # deleted files are still listed until committed
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def build(work):
    """Build the sdist and a wheel from it; check their contents; return both."""
    source = work / "source"
    source.mkdir()
    copy_sources(source)
    with open(work / "build.log", "w") as log:
        built = subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(source)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if built.returncode != 0:
        print("".join((work / "build.log").read_text().splitlines(True)[-50:]))
        raise Failure("python -m build")
    sdist = only(work / "dist" / "semidbm-*.tar.gz")
    wheel = only(work / "dist" / "semidbm-*.whl")
    print("built %s and %s" % (sdist.name, wheel.name))
    with tarfile.open(sdist) as archive:
        in_sdist = archive.getnames()
    if not any(name.endswith("/src/semidbm/_core.pyx") for name in in_sdist):
        raise Failure("the sdist lacks _core.pyx")
    if not any("/tests/fixtures/v051/" in name for name in in_sdist):
        raise Failure("the sdist lacks the test fixtures")
    if any(name.endswith("/src/semidbm/_core.c") for name in in_sdist):
        raise Failure("the sdist holds the generated _core.c")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    for name in ("py.typed", "_core.pyi"):
        if "semidbm/" + name not in in_wheel:
            raise Failure("the wheel lacks " + name)
    run(TOOLS / "twine", "check", "--strict", sdist, wheel)
    return sdist, wheel


def repair(work, wheel):
    """``auditwheel repair`` the wheel; it must get a manylinux tag. Return the repaired wheel."""
    run(TOOLS / "auditwheel", "show", wheel)
    run(TOOLS / "auditwheel", "repair", "--wheel-dir", work / "wheelhouse", wheel)
    repaired = only(work / "wheelhouse" / "semidbm-*.whl")
    if "-manylinux_" not in repaired.name and ".manylinux_" not in repaired.name:
        raise Failure("the repaired wheel has no manylinux tag: " + repaired.name)
    print("manylinux wheel: " + repaired.name)
    run(TOOLS / "twine", "check", "--strict", repaired)
    return repaired


class Checker:
    """The checks that install the distributions, some of them side by side."""

    def __init__(self, work, python):
        self.work = work
        self.python = python
        self.background = ThreadPoolExecutor(max_workers=2)
        self.jobs = {}

    def fresh_venv(self, name, *install, **options):
        """A fresh venv ``work/NAME`` with ``pip install INSTALL``; return its directory."""
        place = self.work / name
        run(self.python, "-m", "venv", place, **options)
        run(place / "bin" / "python", "-m", "pip", "install", "-q", *install, **options)
        return place

    def installed_suite(self, venv, selection, env=None, **options):
        """The test files ``selection`` against the install in ``venv`` (test_installed.py),
        from its own directory."""
        directory = Path(str(venv) + "-run")
        directory.mkdir(exist_ok=True)
        run(venv / "bin" / "python", PROJECT / "scripts" / "test_installed.py",
            "--tests", ",".join(selection), "-q", cwd=directory, env=env, **options)

    def start(self, name, function, *arguments):
        """Start ``function(*arguments, log)`` beside the foreground steps, output to its log."""
        log = open(self.work / (name + ".log"), "w")
        self.jobs[name] = (self.background.submit(function, *arguments, log), log)

    def finish(self, name):
        """Wait for the job ``name``, show its output, and fail if it failed."""
        future, log = self.jobs.pop(name)
        try:
            error = future.exception()
        finally:
            log.close()
        for line in (self.work / (name + ".log")).read_text().splitlines():
            print("[%s] %s" % (name, line))
        if error is not None:
            raise Failure("%s: %s" % (name, error))

    def install_sdist(self, sdist, log):
        """The sdist in a fresh venv without Cython (pip fetches it for the build only)."""
        to_log = {"stdout": log, "stderr": subprocess.STDOUT}
        venv = self.fresh_venv("sdist-venv", "--no-cache-dir", "%s[test]" % sdist, **to_log)
        has_cython = subprocess.run([str(venv / "bin" / "python"), "-c", "import Cython"], **to_log)
        if has_cython.returncode == 0:
            raise Failure("Cython is installed in the sdist venv")

    def build_pure(self, sdist, log):
        """A wheel of the sdist with SEMIDBM_NO_EXTENSIONS=1; without it, a failing compiler fails.

        The failure must name the variable.
        """
        wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir"]
        run(*wheel, "--wheel-dir", self.work / "pure", sdist,
            env=dict(os.environ, SEMIDBM_NO_EXTENSIONS="1"), stdout=log, stderr=subprocess.STDOUT)
        failed = subprocess.run(
            [*wheel, "--wheel-dir", str(self.work / "no-compiler"), str(sdist)],
            env=dict(os.environ, CC="false"),
            capture_output=True,
            text=True,
        )
        if failed.returncode == 0:
            raise Failure("the sdist installed although the C compiler failed")
        if "or set SEMIDBM_NO_EXTENSIONS=1" not in failed.stdout + failed.stderr:
            print((failed.stdout + failed.stderr)[-3000:], file=log, flush=True)
            raise Failure("a failed compile does not name SEMIDBM_NO_EXTENSIONS")
        print("a failed compile says: set SEMIDBM_NO_EXTENSIONS=1", file=log, flush=True)

    def readme_install(self, log):
        """README's install commands in a copy of the sources, a fresh venv first on PATH.

        Then its version transcript must print what README shows.
        """
        commands, transcript = readme_install((PROJECT / "README.md").read_text())
        clone = self.work / "clone"
        clone.mkdir()
        copy_sources(clone)
        venv = self.work / "readme-venv"
        run(self.python, "-m", "venv", venv, stdout=log, stderr=subprocess.STDOUT)
        env = dict(os.environ, PATH=os.pathsep.join([str(venv / "bin"), os.environ["PATH"]]))
        for command in commands:
            print("$ " + command, file=log, flush=True)
            run("bash", "-e", "-c", command, cwd=clone, env=env, stdout=log,
                stderr=subprocess.STDOUT)
        for command, shown in transcript:
            done = run("bash", "-c", command, cwd=self.work, env=env, capture_output=True,
                       text=True)
            printed = (done.stdout + done.stderr).rstrip("\n")
            print("$ %s\n%s" % (command, printed), file=log, flush=True)
            if printed != shown:
                raise Failure("README shows %r for %s; it printed %r" % (shown, command, printed))

    def pure_suite(self, venv, log):
        """The suite on the pure-Python install, told it has no compiled kernel."""
        self.installed_suite(venv, BUILT_SELECTION,
                             env=dict(os.environ, SEMIDBM_NO_EXTENSIONS="1"),
                             stdout=log, stderr=subprocess.STDOUT)

    def types(self, wheel_venv):
        """mypy --strict on the typed example and on misuse (six errors), stubtest, the example."""
        python = wheel_venv / "bin" / "python"
        requirements = (PROJECT / "scripts" / "packaging-requirements.txt").read_text().split()
        run(python, "-m", "pip", "install", "-q",
            *[line for line in requirements if line.startswith("mypy==")])
        directory = self.work / "typing"
        directory.mkdir()
        run(python, "-m", "mypy", "--strict", "--no-incremental",
            PROJECT / "examples" / "typed_usage.py", cwd=directory)
        run(python, "-m", "mypy.stubtest", "--allowlist",
            PROJECT / "scripts" / "stubtest-allowlist.txt", "semidbm", cwd=directory)
        misuse = subprocess.run(
            [str(python), "-m", "mypy", "--strict", "--no-incremental", "-c", MISUSE],
            cwd=directory, capture_output=True, text=True,
        )
        if misuse.returncode == 0:
            raise Failure("mypy accepted code with type errors")
        if "Found 6 errors" not in misuse.stdout:
            print(misuse.stdout + misuse.stderr)
            raise Failure("mypy found other errors than the six expected")
        run(python, PROJECT / "examples" / "typed_usage.py", cwd=directory)

    def check(self):
        step("build an sdist and a wheel from a copy of the sources; README's install "
             "commands in another copy (in the background)")
        self.start("readme-install", self.readme_install)
        sdist, wheel = build(self.work)

        step("auditwheel")
        repaired = repair(self.work, wheel)

        step("the sdist installed (in the background); the wheel in a fresh venv: the installed "
             "selection of the suite")
        self.start("sdist-install", self.install_sdist, sdist)
        self.start("pure-build", self.build_pure, sdist)
        wheel_venv = self.fresh_venv("wheel-venv", "%s[test]" % repaired)
        self.installed_suite(wheel_venv, INSTALLED_SELECTION)

        step("the wheel: types (mypy --strict, stubtest) and the typed example")
        self.types(wheel_venv)

        step("SEMIDBM_NO_EXTENSIONS=1: a pure-Python wheel from the sdist, and BUILT_SELECTION "
             "on it (in the background)")
        self.finish("pure-build")
        pure = only(self.work / "pure" / "semidbm-*.whl")
        if not pure.name.endswith("-py3-none-any.whl"):
            raise Failure("SEMIDBM_NO_EXTENSIONS=1 did not give a pure wheel: " + pure.name)
        print("pure wheel: " + pure.name)
        pure_venv = self.fresh_venv("pure-venv", "%s[test]" % pure)
        self.start("pure-suite", self.pure_suite, pure_venv)

        step("the sdist in a fresh venv without Cython: it built, and passes BUILT_SELECTION")
        self.finish("sdist-install")
        self.installed_suite(self.work / "sdist-venv", BUILT_SELECTION)
        self.finish("pure-suite")

        step("README's install commands, and its version check on what they installed")
        self.finish("readme-install")

        step("cibuildwheel build identifiers and the workflow file")
        run(sys.executable, PROJECT / "scripts" / "check_build_identifiers.py")
        run(TOOLS / "check-jsonschema", "--builtin-schema", "vendor.github-workflows",
            *sorted((PROJECT / ".github" / "workflows").glob("*.yml")))


def main(python):
    # Each line out at once, in order with the output of the commands run.
    sys.stdout.reconfigure(line_buffering=True)
    for name in LEFT_OUT:
        os.environ.pop(name, None)
    os.environ["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    work = Path(tempfile.mkdtemp(prefix="semidbm-packaging."))
    # Open to all: a test runs the installed semidbm as an unprivileged user.
    os.chmod(work, 0o755)
    checker = Checker(work, python)
    try:
        checker.check()
    except Failure as failure:
        sys.exit("packaging: FAILED: %s" % failure)
    finally:
        checker.background.shutdown(wait=True)
        if os.environ.get("SEMIDBM_PACKAGING_KEEP") == "1":
            print("packaging: kept %s" % work)
        else:
            shutil.rmtree(work)
    step("done: all packaging checks passed in %d s" % (time.monotonic() - STARTED))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check_packaging.py PYTHON (the Python that makes the fresh venvs)")
    main(sys.argv[1])
