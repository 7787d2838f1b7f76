"""Build configuration for the compiled kernel; the metadata lives in setup.cfg.

Setting the environment variable ``SEMIDBM_NO_EXTENSIONS=1`` at build
time skips the compiled kernel: the package is then pure Python (a
``py3-none-any`` wheel) and runs on the pure-Python kernel. Without it,
a failed compilation is an error that says how to skip it.
"""

import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def extensions_wanted():
    """False when ``SEMIDBM_NO_EXTENSIONS`` is set to anything but empty or ``0``."""
    return os.environ.get("SEMIDBM_NO_EXTENSIONS", "") in ("", "0")


class BuildExtension(build_ext):
    """``build_ext`` that names the way out when the C compiler fails.

    An editable install copies the extension into ``src/semidbm``: it is
    written beside it and renamed over it, so that a process that has
    the old one loaded (tests running while another environment builds)
    keeps reading a whole file.
    """

    def copy_file(self, infile, outfile, *args, **kwargs):
        if os.path.isdir(outfile):
            outfile = os.path.join(outfile, os.path.basename(infile))
        written = outfile + ".new"
        result = super().copy_file(infile, written, *args, **kwargs)
        os.replace(written, outfile)
        return (outfile,) + tuple(result[1:])

    def run(self):
        try:
            super().run()
        except Exception as exc:
            raise RuntimeError(
                "semidbm: building the compiled kernel failed (%s). Install a C "
                "compiler and the Python headers, or set SEMIDBM_NO_EXTENSIONS=1 "
                "to install the pure-Python kernel only." % exc
            ) from exc


def compiled_kernel():
    """The extension module list: the Cython kernel, or nothing if it is skipped."""
    if not extensions_wanted():
        return []
    from Cython.Build import cythonize

    return cythonize(
        [
            Extension(
                "semidbm._core",
                ["src/semidbm/_core.pyx"],
                # The files _core.pyx includes: a change to one rebuilds the kernel.
                depends=sorted(glob.glob("src/semidbm/_core_pieces/*")),
            )
        ],
        compiler_directives={"language_level": 3},
    )


setup(ext_modules=compiled_kernel(), cmdclass={"build_ext": BuildExtension})
