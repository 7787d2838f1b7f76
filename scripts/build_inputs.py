"""What the compiled kernel is built from, as one digest: a build is skipped while it holds.

noxfile.py's ``install_checkout`` installs the checkout editable (and so
builds the compiled kernel) only when it is not ``up_to_date``. Two notes
say what an install was made from (``record``, under the build's lock,
with the digests taken before it began): one in the session's
environment (the inputs and the extras it installed), one beside the
compiled kernel in ``src/semidbm`` (the inputs it was built from), which
every environment of the same Python shares: a build for one of them
changes what the others run, and they see it. The digest covers:

- the compiled kernel's sources, ``src/semidbm/*.pyx`` and ``*.pxd``
  and the pieces they include (``src/semidbm/_core_pieces``: ``*.pxi``
  and ``*.h``), by their bytes: a change to any one rebuilds;
- the build's configuration, ``setup.py``, ``setup.cfg`` and
  ``pyproject.toml``, by their bytes (a new dependency or extra), and
  the environment variables that change a build (``ENVIRONMENT``);
- the names of every other file of the package, ``src/semidbm/*``: a
  module added or removed installs again. Their bytes are left out: an
  editable install reads the Python modules from the checkout, so a
  change to one needs no install;
- the extras asked for (the environment's note only).

A new release of Cython, which pip takes for each build, is not an
input: the next build takes it.
"""

import hashlib
import os
from pathlib import Path

#: The compiled kernel's sources, by their endings.
COMPILED = (".pyx", ".pxd", ".pxi", ".h")

#: The build's configuration, at the top of the checkout.
CONFIGURATION = ("setup.py", "setup.cfg", "pyproject.toml")

#: The environment variables that change what a build makes.
ENVIRONMENT = ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS", "SEMIDBM_NO_EXTENSIONS")

#: The folder of the pieces the compiled kernel includes, in the package.
PIECES = "_core_pieces"

#: What the build writes into the package, not an input of it.
WRITTEN = (".so", ".pyd", ".c", ".new", ".inputs")


def digest(root, extras=None):
    """The digest of the build inputs of the checkout at ``root``, with ``extras`` if given."""
    root = Path(root)
    package = root / "src" / "semidbm"
    found = hashlib.sha256()
    if extras is not None:
        found.update(("extras: %s\n" % ",".join(sorted(extras))).encode())
    for name in ENVIRONMENT:
        found.update(("environment %s=%r\n" % (name, os.environ.get(name))).encode())
    for name in CONFIGURATION:
        found.update(b"file %s\n" % name.encode())
        found.update((root / name).read_bytes())
    for path in package_files(package):
        found.update(b"name %s\n" % path.relative_to(package).as_posix().encode())
        if path.name.endswith(COMPILED):
            found.update(path.read_bytes())
    return found.hexdigest()


def package_files(package):
    """The files of the package folder and of its pieces folder, in order, less what a build
    writes (``__pycache__`` and other folders are left out)."""
    paths = sorted(package.iterdir()) + sorted((package / PIECES).glob("*"))
    return [path for path in paths if path.is_file() and not path.name.endswith(WRITTEN)]


def extension_of(root, suffix):
    """Where an editable install puts the compiled kernel for the Python whose
    extension suffix is ``suffix`` (``sysconfig``'s ``EXT_SUFFIX``)."""
    return Path(root) / "src" / "semidbm" / ("_core" + suffix)


def built_from(root, suffix):
    """The note beside that compiled kernel: the digest of the inputs it was built from,
    and which file that was (``identity``)."""
    return extension_of(root, suffix).with_name("_core" + suffix + ".inputs")


def identity(path):
    """Which file ``path`` is: its inode, size and time of change. A build by anything else
    (a ``pip install -e .`` by hand) writes another file, and the note no longer holds."""
    found = os.stat(path)
    return "%d:%d:%d" % (found.st_ino, found.st_size, found.st_mtime_ns)


def digests(root, extras):
    """What ``record`` notes: the environment's digest (with ``extras``) and the build's."""
    return digest(root, extras), digest(root)


def up_to_date(stamp, root, extras, suffix):
    """True if the environment whose note is ``stamp`` was installed from the build inputs
    that ``root`` has now, with ``extras``, and the compiled kernel beside it (extension
    suffix ``suffix``) was built from them too."""
    stamp, built, extension = Path(stamp), built_from(root, suffix), extension_of(root, suffix)
    environment, build = digests(root, extras)
    return (
        stamp.exists()
        and stamp.read_text() == environment
        and extension.exists()
        and built.exists()
        and built.read_text() == "%s %s" % (build, identity(extension))
    )


def record(stamp, root, suffix, taken):
    """Note an install done from the inputs whose ``digests`` were ``taken`` before it began:
    in the environment's ``stamp``, and beside the compiled kernel (suffix ``suffix``)."""
    environment, build = taken
    built_from(root, suffix).write_text(
        "%s %s" % (build, identity(extension_of(root, suffix))))
    Path(stamp).write_text(environment)
