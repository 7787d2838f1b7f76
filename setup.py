"""Build configuration for the compiled kernel; the metadata lives in setup.cfg."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension(
                "semidbm._core",
                ["src/semidbm/_core.pyx"],
                depends=["src/semidbm/_crc32.h", "src/semidbm/_platform.h"],
            )
        ],
        compiler_directives={"language_level": 3},
    )
)
