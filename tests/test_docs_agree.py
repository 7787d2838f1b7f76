"""The documentation agrees with the API: every public name is explained, no page calls it missing.

The API reference (docs/api.md) is drawn from the docstrings, so it
lists every name; a page written by hand may fall behind. Two checks:

- Every public name of ``semidbm.__all__``, and every public method and
  property of its classes (``Database``, ``Batch``: theirs and the
  mapping methods they inherit, not those of builtin bases such as
  ``OSError``), appears in the code (inline or in a block) of a page
  other than the reference: README.md and docs/, the changelog and the
  benchmark reports left out.
- Phrases that say a feature is missing or to come ("does not have
  yet", "no atomic batches") are looked for in those pages, the
  changelog and the package's source (docstrings, messages, the
  command's help). Each occurrence must be listed in ``TRUE_SAYINGS``
  with the reason it is true; a listed one that is gone fails too, so
  the list stays that of the occurrences there are.

Where the documentation did not come with the tests (an installed
wheel), the page checks are skipped, saying why.
"""

import inspect
import re
from pathlib import Path

import pytest

import semidbm

pytestmark = pytest.mark.tooling

ROOT = Path(__file__).resolve().parent.parent

#: The package's own files, as installed or in the checkout.
PACKAGE = Path(semidbm.__file__).resolve().parent

#: The API reference, drawn from the docstrings: a name it lists is not explained by that alone.
REFERENCE = "docs/api.md"

#: Pages that are no explanation of a name: the changelog and the generated benchmark reports.
NOT_EXPLAINING = ("docs/changelog.md", "docs/bench/")

#: A fenced block (its text) or an inline code span.
CODE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(.*?)^ {0,3}\1[ \t]*$|``?([^`\n]+)``?", re.M | re.S)

#: Phrases that call a feature missing or to come (case is ignored).
MISSING_FEATURE = [
    "does not have yet",
    "not yet supported",
    "not supported yet",
    "not yet implemented",
    "not implemented yet",
    "no atomic batches",
    "no batches",
    "all or nothing needs",
    "in a future version",
    "in a future release",
    "coming soon",
]

#: The occurrences of those phrases that are true: (file, phrase) -> why.
TRUE_SAYINGS = {
    ("src/semidbm/_messages.py", "no batches"): (
        "NO_BATCHES, the error of db.batch() on a database of format 1.1, which has no batch "
        "record (docs/FORMAT.md)"
    ),
}


def pages():
    """README.md and the Markdown pages of docs/ that came with these tests, by their path."""
    found = {"README.md": ROOT / "README.md"} if (ROOT / "README.md").is_file() else {}
    if (ROOT / "docs").is_dir():
        for path in sorted((ROOT / "docs").rglob("*.md")):
            if "_build" not in path.parts:
                found[path.relative_to(ROOT).as_posix()] = path
    return found


def needs_pages():
    """Skip, saying why, where the documentation did not come with the tests."""
    if REFERENCE not in pages():
        pytest.skip("docs/ is not beside tests/: this copy of the tests came without it")


def code_of(text):
    """The code of a Markdown page: its fenced blocks and inline code spans, one a line."""
    return "\n".join(found.group(2) or found.group(3) or "" for found in CODE.finditer(text))


def explaining_code():
    """The code of every page that explains names: all but the reference and NOT_EXPLAINING."""
    return "\n".join(
        code_of(path.read_text(encoding="utf-8"))
        for name, path in pages().items()
        if name != REFERENCE and not name.startswith(NOT_EXPLAINING)
    )


def public_members(cls):
    """The public methods and properties of ``cls``, but those of builtin bases (``OSError``)."""
    members = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next(base for base in cls.__mro__ if name in vars(base))
        if owner.__module__ != "builtins":
            members.append("%s.%s" % (cls.__name__, name))
    return members


def public_names():
    """Every public name of semidbm: ``__all__``'s, then its classes' members (``Class.name``)."""
    names = list(semidbm.__all__)
    for name in semidbm.__all__:
        value = getattr(semidbm, name)
        if inspect.isclass(value):
            names += public_members(value)
    return names


def unexplained(names, code):
    """The names of ``names`` that ``code`` never shows (``Class.member``: its member, a word)."""
    return [name for name in names if not _shows(name.split(".")[-1], code)]


def _shows(word, code):
    """Whether ``word`` is a whole word of ``code``."""
    return re.search(r"\b%s\b" % re.escape(word), code) is not None


def test_every_public_name_is_explained_on_a_page_besides_the_reference():
    needs_pages()
    assert unexplained(public_names(), explaining_code()) == []


def searched_texts():
    """The texts the phrases are looked for in, by path: the pages, the changelog, the source."""
    texts = {name: path.read_text(encoding="utf-8") for name, path in pages().items()}
    if (ROOT / "CHANGELOG.md").is_file():
        texts["CHANGELOG.md"] = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for path in sorted(PACKAGE.iterdir()) + sorted(PACKAGE.glob("_core_pieces/*")):
        if path.suffix in (".py", ".pyi", ".pyx", ".pxi"):
            name = path.relative_to(PACKAGE).as_posix()
            texts["src/semidbm/" + name] = path.read_text(encoding="utf-8")
    return texts


def sayings(texts):
    """The (file, phrase) pairs of MISSING_FEATURE found in ``texts``, lines joined as one text."""
    found = set()
    for name, text in texts.items():
        flowing = " ".join(text.lower().split())  # a phrase may be broken across lines
        for phrase in MISSING_FEATURE:
            if phrase in flowing:
                found.add((name, phrase))
    return found


def test_every_saying_that_a_feature_is_missing_is_listed_as_true():
    found = sayings(searched_texts())
    assert sorted(found - set(TRUE_SAYINGS)) == []
    if REFERENCE in pages():  # else only the package's files were searched
        assert sorted(set(TRUE_SAYINGS) - found) == []


def test_code_spans_and_blocks_are_what_is_searched():
    text = (
        "Prose names sync but not as code.\n"
        "Call `db.refresh()` or ``db.view(key)``.\n"
        "```python\n"
        "db.compact()\n"
        "```\n"
    )
    code = code_of(text)
    assert unexplained(["Database.sync", "Database.refresh", "Database.view", "compact"], code) == [
        "Database.sync"
    ]


def test_a_phrase_broken_across_lines_is_found():
    text = "Batches are something semidbm does not\n  have yet."
    assert sayings({"page.md": text}) == {("page.md", "does not have yet")}
