"""Assert the exact list of wheels cibuildwheel builds, per platform and per workflow job.

Run with the interpreter that has the pinned packaging tools
(``scripts/packaging-requirements.txt``); ``scripts/check_packaging.py``
does. For each platform, ``cibuildwheel --print-build-identifiers``
(offline: it only reads ``pyproject.toml``) must list exactly the
intended builds below. Then each job of ``.github/workflows/wheels.yml``
is asked the same with its ``CIBW_ARCHS``: together the jobs must build
every intended wheel, each exactly once.

The intended builds: CPython 3.9 to 3.15 (the newest release the pinned
cibuildwheel supports), no free-threaded builds (see pyproject.toml), on
Linux (manylinux and musllinux, x86_64 and aarch64), macOS (x86_64 and
arm64) and Windows (AMD64).
"""

import os
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

PROJECT = Path(__file__).resolve().parent.parent
WORKFLOW = PROJECT / ".github" / "workflows" / "wheels.yml"

VERSIONS = ["cp39", "cp310", "cp311", "cp312", "cp313", "cp314", "cp315"]

INTENDED = {
    "linux": {
        "%s-%s_%s" % (version, libc, arch)
        for version in VERSIONS
        for libc in ("manylinux", "musllinux")
        for arch in ("x86_64", "aarch64")
    },
    "macos": {
        "%s-macosx_%s" % (version, arch) for version in VERSIONS for arch in ("x86_64", "arm64")
    },
    "windows": {"%s-win_amd64" % version for version in VERSIONS},
}


def identifiers(platform, archs=None):
    """What cibuildwheel would build for ``platform`` (and ``archs``), as a list."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CIBW_")}
    if archs is not None:
        env["CIBW_ARCHS"] = archs
    result = subprocess.run(
        [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers",
         "--platform", platform, str(PROJECT)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()


def workflow_jobs():
    """The ``(platform, archs)`` of each job in the wheels workflow's matrix."""
    workflow = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    jobs = workflow["jobs"]["wheels"]["strategy"]["matrix"]["include"]
    return [(job["platform"], job["archs"]) for job in jobs]


def main():
    failures = []
    for platform, intended in INTENDED.items():
        found = identifiers(platform)
        print("%s (%d): %s" % (platform, len(found), " ".join(found)))
        if len(found) != len(set(found)) or set(found) != intended:
            failures.append(
                "%s: missing %s, unexpected %s"
                % (platform, sorted(intended - set(found)), sorted(set(found) - intended))
            )

    built = []
    for platform, archs in workflow_jobs():
        job = identifiers(platform, archs)
        print("workflow job %s %s: %d builds" % (platform, archs, len(job)))
        built += [(platform, identifier) for identifier in job]
    intended_all = {
        (platform, identifier) for platform, ids in INTENDED.items() for identifier in ids
    }
    if len(built) != len(set(built)):
        failures.append("workflow: some wheels are built by more than one job")
    if set(built) != intended_all:
        failures.append(
            "workflow: missing %s, unexpected %s"
            % (sorted(intended_all - set(built)), sorted(set(built) - intended_all))
        )

    if failures:
        sys.exit("build identifiers are not the intended ones:\n  " + "\n  ".join(failures))
    print("build identifiers: %d wheels, as intended" % len(intended_all))


if __name__ == "__main__":
    main()
