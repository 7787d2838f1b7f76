"""Sphinx settings of semidbm's documentation site.

Built by ``bash scripts/nox.sh -s docs`` (HTML into ``docs/_build/html``,
warnings as errors, every cross-reference checked, then the docstrings'
examples run by the doctest builder) and by Read the Docs
(``.readthedocs.yaml``). The pages are Markdown (MyST); the API
reference is drawn from the docstrings of the installed package, so
semidbm must be importable. Every name it documents is Python code,
the same whichever kernel runs.
"""

import os
import sys

import semidbm

project = "semidbm"
author = "the semidbm developers"
copyright = "semidbm's authors"
release = version = semidbm.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.doctest",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "requirements.txt"]

# Every cross-reference must resolve: a broken one is a warning, and the
# build treats warnings as errors.
nitpicky = True

# Headings up to this level get anchors that links between pages can name
# (``durability.md#compaction``).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
# The docstrings say what each parameter takes and what comes back (their
# Args and Returns): the signatures show names and defaults as written.
autodoc_typehints = "none"
autodoc_preserve_defaults = True
# semidbm.dask imports Dask, an optional part the site's build does without:
# its reference needs only the module's own docstrings.
autodoc_mock_imports = ["dask", "pandas"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_preprocess_types = True

#: Python's own inventory: the Debian package python3.11-doc's copy where it
#: is installed (CI and this machine have no internet), else docs.python.org
#: (Read the Docs).
LOCAL_PYTHON_INVENTORY = "/usr/share/doc/python3.11/html/objects.inv"
intersphinx_mapping = {
    "python": (
        "https://docs.python.org/3",
        LOCAL_PYTHON_INVENTORY if os.path.exists(LOCAL_PYTHON_INVENTORY) else None,
    ),
}
# The docstrings' examples run in a fresh directory, which they may fill.
doctest_global_setup = """
import os, tempfile
os.chdir(tempfile.mkdtemp(prefix="semidbm-doctest-"))
import semidbm, semidbm.migrate
"""

html_theme = "furo"
html_title = "semidbm %s" % release
html_static_path = []

# Python's own version in the build log, for the record of which one built it.
print("building semidbm %s (%s kernel) with Python %s" % (release, semidbm.implementation,
                                                         sys.version.split()[0]))
