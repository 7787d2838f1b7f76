"""Debian unstable in a folder of the checkout, for the Pythons this machine lacks.

The wheels promise CPython versions that the machine's own Debian does
not have (3.14 and 3.15). Debian's unstable release has them: noxfile.py
makes a minimal unstable system with ``debootstrap`` in the folder
``.debian-unstable`` (ignored by git; about 750 MB, under a minute to
make) and runs the tests there under ``chroot``, as root, with the
checkout mounted at its own path (so that paths agree inside and out).

Each command runs in a private mount namespace: ``unshare --mount`` runs
this module with the command as arguments, and it mounts ``/proc``, a
fresh ``/dev/pts`` (the CLI's progress bar is tested on a
pseudo-terminal), ``/dev/shm``, this machine's ``/dev/fuse`` if it has
one (the power-loss tests mount a FUSE file system) and the checkout in
the folder, enters it and runs the command. The mounts end with the command, so nothing is
left mounted.

Inside, pip needs this machine's settings: its configuration files and
the certificate bundle they name are copied in (a setting naming a local
directory the folder lacks, such as a ``find-links`` wheel directory, is
left out), and so are the DNS settings.

Needs root (debootstrap, mount and chroot do), Debian's ``debootstrap``
(installed with apt-get if missing) and the Debian mirror.
"""

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The folder, beside the checkout's other untracked environments.
FOLDER = ROOT / ".debian-unstable"

#: The Pythons taken from unstable: each with its headers, venv and dbm.gnu.
VERSIONS = ["3.14", "3.15"]

#: What the folder holds beyond the minimal system: the Pythons, a C compiler
#: for the compiled kernel, and git for the tests that read the checkout.
PACKAGES = [
    "python%s%s" % (version, suffix)
    for version in VERSIONS
    for suffix in ("", "-dev", "-venv", "-gdbm")
] + ["gcc", "libc6-dev", "git"]

#: Seconds apt-get waits for a lock that another apt-get or dpkg holds, before it fails.
APT_LOCK_TIMEOUT = 600

#: Given to every apt-get call, here and in noxfile.py: wait for dpkg's lock, rather
#: than fail at once, while another apt-get runs (unattended upgrades, say).
APT_WAIT = ["-o", "DPkg::Lock::Timeout=%d" % APT_LOCK_TIMEOUT]

#: Used when this machine's apt names no Debian mirror.
DEFAULT_MIRROR = "http://deb.debian.org/debian"

#: Unstable's Release file is valid for a week; a mirror that is a frozen
#: snapshot serves one past its date, which apt refuses unless told.
APT_SETTINGS = 'Acquire::Check-Valid-Until "false";\n'

#: Where the checkout appears inside the folder: at its own path, so that a
#: path means the same inside and out (and the suite's check for machine
#: paths in tracked files sees the checkout's real path).
CHECKOUT = str(ROOT)

#: pip's configuration files on this machine (a user's go to root's home in
#: the folder, since root runs the commands there).
PIP_CONFIGURATION = [
    "/etc/pip.conf",
    "/etc/xdg/pip/pip.conf",
    "~/.pip/pip.conf",
    "~/.config/pip/pip.conf",
]

#: A fixed search path inside the folder: this machine's may name tools the folder lacks.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def debian_mirror():
    """The first Debian archive this machine's apt uses (its mirror or cache), or the default."""
    apt = Path("/etc/apt")
    sources = [*apt.glob("sources.list.d/*.sources"), apt / "sources.list"]
    sources += apt.glob("sources.list.d/*.list")
    for source in sources:
        try:
            lines = source.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split()
            if words[:1] == ["URIs:"]:
                uris = words[1:]
            elif words[:1] == ["deb"]:
                uris = [word for word in words[1:] if "://" in word][:1]
            else:
                continue
            for uri in uris:
                if uri.rstrip("/").endswith("/debian"):
                    return uri.rstrip("/")
    return DEFAULT_MIRROR


def inside(path):
    """The place in the folder of the absolute path ``path`` of the folder's own system."""
    return FOLDER / str(path).lstrip("/")


def root_home():
    """root's home directory in the folder, as its /etc/passwd gives it."""
    for line in inside("/etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) > 5 and fields[2] == "0":
            return fields[5]
    raise RuntimeError("the folder's /etc/passwd has no user 0")


def run_inside(session, *command, env=None, **options):
    """Run ``command`` in the folder, as root, from the checkout, in a private mount namespace.

    The environment is a fixed, small one (``env`` adds to it): this
    machine's paths mean nothing in the folder.
    """
    environment = {"PATH": PATH, "HOME": root_home(), "LANG": "C.UTF-8"}
    environment.update(carried_environment())
    environment.update(env or {})
    return session.run(
        "unshare", "--mount", "--propagation", "private", sys.executable, __file__, *command,
        env=environment, include_outer_env=False, external=True, **options,
    )


def enter_and_run(command):
    """Mount what the folder needs, enter it and run ``command`` there, from the checkout.

    Run by ``run_inside`` in a new mount namespace (``unshare``), so that
    the mounts end with the command.
    """
    inside(CHECKOUT).mkdir(parents=True, exist_ok=True)
    mounts = [
        ["-t", "proc", "proc", inside("/proc")],
        ["-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620", "devpts", inside("/dev/pts")],
        ["--bind", inside("/dev/pts/ptmx"), inside("/dev/ptmx")],
        ["-t", "tmpfs", "-o", "mode=1777", "shm", inside("/dev/shm")],
        ["--bind", ROOT, inside(CHECKOUT)],
    ]
    if os.path.exists("/dev/fuse"):  # for the power-loss tests' FUSE file system
        inside("/dev/fuse").touch()
        mounts.append(["--bind", "/dev/fuse", inside("/dev/fuse")])
    for arguments in mounts:
        subprocess.run(["mount", *map(str, arguments)], check=True)
    os.chroot(FOLDER)
    os.chdir(CHECKOUT)
    os.execvp(command[0], command)


def carried_environment():
    """The variables of this environment that matter in the folder too.

    ``CI`` (the tests are stricter under it), the proxy settings, the
    project's ``SEMIDBM_*`` settings and pip's ``PIP_*`` ones, less those
    naming a local path the folder lacks.
    """
    carried = {}
    for name, value in os.environ.items():
        if name == "CI" or name.lower().endswith("_proxy") or name.startswith("SEMIDBM_"):
            carried[name] = value
        elif name.startswith("PIP_"):
            kept = available_inside(value)
            if kept:
                carried[name] = kept
    return carried


def available_inside(value):
    """The words of a pip setting less the local paths (or file: URLs) the folder lacks."""
    kept = []
    for word in value.split():
        path = word[len("file://"):] if word.startswith("file://") else word
        if path.startswith("/") and not inside(path).exists():
            continue
        kept.append(word)
    return " ".join(kept)


def copy_in(path):
    """Copy this machine's file ``path`` to the same place in the folder."""
    target = inside(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)


def copy_pip_settings():
    """Copy pip's configuration files and the certificates they name into the folder.

    Certificate files (``cert``, ``client-cert``, also as ``PIP_CERT``
    and ``PIP_CLIENT_CERT``) are copied first, so that they are kept; a
    setting left naming only local paths the folder lacks is dropped.
    """
    certificates = [os.environ.get("PIP_CERT"), os.environ.get("PIP_CLIENT_CERT")]
    files = []
    for name in PIP_CONFIGURATION + [os.environ.get("PIP_CONFIG_FILE")]:
        if name and os.path.isfile(os.path.expanduser(name)):
            configuration = configparser.ConfigParser(interpolation=None)
            configuration.read(os.path.expanduser(name))
            for section in configuration.sections():
                certificates += [configuration[section].get(key) for key in ("cert", "client-cert")]
            files.append((name, configuration))
    for certificate in certificates:
        if certificate and os.path.isfile(certificate):
            copy_in(certificate)
    for name, configuration in files:
        for section in configuration.sections():
            for key, value in list(configuration[section].items()):
                kept = available_inside(value)
                if kept:
                    configuration[section][key] = kept
                else:
                    del configuration[section][key]
        target = inside(root_home() + name[1:] if name.startswith("~") else name)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w") as handle:
            configuration.write(handle)


def missing_packages(session):
    """The packages of PACKAGES the folder does not have installed."""
    listed = session.run(
        "chroot", str(FOLDER), "dpkg-query", "-W", "-f", "${Package} ${Status}\\n",
        silent=True, external=True,
    )
    installed = {
        line.split()[0] for line in listed.splitlines() if line.endswith(" install ok installed")
    }
    return [package for package in PACKAGES if package not in installed]


def make_folder(session, debian_packages):
    """Make the folder with debootstrap if it is missing, then bring it up to date.

    ``debian_packages`` installs this machine's packages (debootstrap).
    debootstrap fills a ``.partial`` folder, renamed when it succeeds, so
    that a run cut short is not taken for a whole system. Every time: the
    apt setting, pip's settings and DNS are copied in, and any package of
    PACKAGES missing (the list grew) is installed with apt inside.
    """
    if not FOLDER.exists():
        debian_packages(session, "debootstrap")
        partial = FOLDER.with_name(FOLDER.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        session.run(
            "debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES),
            "unstable", str(partial), debian_mirror(), external=True,
        )
        partial.rename(FOLDER)
    inside("/etc/apt/apt.conf.d/99semidbm-valid-until").write_text(APT_SETTINGS)
    for name in ("/etc/resolv.conf", "/etc/hosts"):
        if os.path.isfile(name):
            copy_in(name)
    copy_pip_settings()
    missing = missing_packages(session)
    if missing:
        run_inside(session, "apt-get", *APT_WAIT, "update", "-q")
        run_inside(
            session, "apt-get", *APT_WAIT, "install", "-y", "-q", "--no-install-recommends",
            *missing, env={"DEBIAN_FRONTEND": "noninteractive"},
        )


def venv_python(session, name, python):
    """The interpreter of the folder's venv ``/opt/venvs/NAME``, made with ``python`` if missing."""
    place = "/opt/venvs/" + name
    if not inside(place + "/bin/python").exists():
        run_inside(session, python, "-m", "venv", place)
    return place + "/bin/python"


def v051_python(session):
    """The folder's interpreter with semidbm 0.5.1 (its own venv, made on first use)."""
    python = venv_python(session, "semidbm-0.5.1", "python" + VERSIONS[0])
    venv = inside("/opt/venvs/semidbm-0.5.1")
    if not any(venv.glob("lib/*/site-packages/semidbm-0.5.1.dist-info")):
        run_inside(session, python, "-m", "pip", "install", "-q", "semidbm==0.5.1")
    return python


if __name__ == "__main__":
    enter_and_run(sys.argv[1:])
