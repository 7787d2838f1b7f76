"""What a disk may hold after a power cut: a model of durable and volatile file-system state.

A file system keeps what processes write in memory first and puts it on
the disk later, in an order of its own. Only ``fsync`` (or
``fdatasync``) says when something is on the disk: fsync of a file makes
its data and size durable; fsync of a directory makes its entries (the
files created, renamed and removed in it) durable. A killed process
loses none of what it wrote, so kill tests cannot tell whether a program
fsyncs what it must; a power cut loses everything that was not made
durable, or any part of it that the disk had not yet written.

:class:`Disk` replays a trace of file-system operations (recorded by the
FUSE file system of ``tests/harness/powerfs.py``, or written by hand in
a test) and keeps both states:

- the volatile state, what processes see: each file's bytes, each
  directory's entries;
- the durable state: each file's bytes and size as of its last fsync,
  each directory's entries as of its last fsync, and, since then, the
  file writes and size changes (``File.history``) and the directory
  operations (``Disk.pending``) that a disk may or may not have kept.

:meth:`Disk.crash` builds the directory tree that a power cut at this
point of the trace may leave, by one of these rules for file data:

``durable``
    nothing written since the file's last fsync survives;
``all``
    everything survives (what a killed process leaves);
``prefix``
    the writes since the last fsync survive up to some point, in the
    order they were made, cut in page-sized pieces (4,096 bytes, split
    at page boundaries): a disk that writes pages back in order (ext4's
    ``data=ordered`` with in-order writeback);
``zeros``
    the file's new size survives but none of its new data: what the
    file grew by reads as zero bytes (XFS, ext4 ``data=writeback``, and
    generic POSIX allow a size to reach the disk before the data);
``pages``
    any size the file had since its last fsync, and each page that
    changed since then holds any of the versions it had (the durable
    one, zeros past the durable size, or one written since): pages
    written back in any order, the size before or after them;

and one of these for directory operations (create, rename, remove):

``durable``
    only what the directory's fsync covered;
``all``
    every operation survives;
``prefix``
    the operations survive up to some point, in order (a journal that
    commits metadata in order: ext4, XFS);
``subset``
    any subset survives, each operation whole (a rename is atomic), in
    their order: what generic POSIX allows without a directory fsync.

A rename within one directory is one operation: the new name and the
removal of the old one survive together. A rename between two
directories is two, one in each.

Operations of a trace (tuples, first item the name):

- ``("mkdir", parent, name, ino)`` and ``("create", parent, name, ino)``:
  a new directory or empty file ``ino``, linked as ``name`` in ``parent``;
- ``("write", ino, offset, data)`` and ``("truncate", ino, size)``;
- ``("rename", parent, name, new_parent, new_name)``;
- ``("unlink", parent, name)`` (``rmdir`` too);
- ``("fsync", ino)``: a file's or a directory's;
- ``("mark", text)``: a note from the workload, not a file-system
  operation (which sync has returned, which operation comes next).

Inode 1 is the root directory. What the disk holds when the trace starts
is durable (:meth:`Disk.from_tree`).
"""

import hashlib
import os

#: The unit in which a disk writes file data back.
PAGE = 4096

#: Inode number of the root directory.
ROOT = 1

DATA_RULES = ("durable", "all", "prefix", "zeros", "pages")
META_RULES = ("durable", "all", "prefix", "subset")


class File:
    """A regular file: its bytes now, as of its last fsync, and the changes since."""

    __slots__ = ("data", "durable", "history")

    def __init__(self, data=b""):
        self.data = bytearray(data)
        #: The bytes (and so the size) the last fsync made durable.
        self.durable = bytes(data)
        #: Changes since then, in order: ("write", offset, bytes) or ("size", new size).
        self.history = []


class Directory:
    """A directory: its entries now and as of its last fsync (name -> inode)."""

    __slots__ = ("entries", "durable")

    def __init__(self):
        self.entries = {}
        self.durable = {}


class Disk:
    """The volatile and the durable state of a file system, built by replaying a trace."""

    def __init__(self):
        self.nodes = {ROOT: Directory()}
        #: Directory operations no fsync has covered, in order: (directory inode, operation),
        #: an operation being ("link", name, ino), ("unlink", name) or
        #: ("rename", old name, new name, ino).
        self.pending = []
        #: Notes of the workload: (position in the trace, text).
        self.marks = []
        #: How many trace operations have been applied.
        self.time = 0

    @classmethod
    def from_tree(cls, tree):
        """A disk holding ``tree`` (see :func:`read_tree`), all of it durable."""
        disk = cls()
        next_ino = [ROOT + 1]

        def fill(directory, subtree):
            for name, item in sorted(subtree.items()):
                ino = next_ino[0]
                next_ino[0] += 1
                if isinstance(item, dict):
                    disk.nodes[ino] = Directory()
                    fill(disk.nodes[ino], item)
                else:
                    disk.nodes[ino] = File(item)
                directory.entries[name] = ino
            directory.durable = dict(directory.entries)

        fill(disk.nodes[ROOT], tree)
        return disk

    def next_ino(self):
        """An inode number no node has."""
        return max(self.nodes) + 1

    # --- replaying ---

    def apply(self, op):
        """Apply one trace operation to the volatile state (and fsync to the durable one)."""
        getattr(self, "_" + op[0])(*op[1:])
        self.time += 1

    def _mark(self, text):
        self.marks.append((self.time, text))

    def _mkdir(self, parent, name, ino):
        self.nodes[ino] = Directory()
        self._link(parent, name, ino)

    def _create(self, parent, name, ino):
        self.nodes[ino] = File()
        self._link(parent, name, ino)

    def _link(self, parent, name, ino):
        self.nodes[parent].entries[name] = ino
        self.pending.append((parent, ("link", name, ino)))

    def _write(self, ino, offset, data):
        node = self.nodes[ino]
        end = offset + len(data)
        if len(node.data) < offset:
            node.data.extend(bytes(offset - len(node.data)))
        node.data[offset:end] = data
        node.history.append(("write", offset, bytes(data)))

    def _truncate(self, ino, size):
        node = self.nodes[ino]
        if size < len(node.data):
            del node.data[size:]
        else:
            node.data.extend(bytes(size - len(node.data)))
        node.history.append(("size", size))

    def _rename(self, parent, name, new_parent, new_name):
        ino = self.nodes[parent].entries.pop(name)
        self.nodes[new_parent].entries[new_name] = ino
        if parent == new_parent:
            self.pending.append((parent, ("rename", name, new_name, ino)))
        else:
            self.pending.append((parent, ("unlink", name)))
            self.pending.append((new_parent, ("link", new_name, ino)))

    def _unlink(self, parent, name):
        del self.nodes[parent].entries[name]
        self.pending.append((parent, ("unlink", name)))

    _rmdir = _unlink

    def _fsync(self, ino):
        node = self.nodes[ino]
        if isinstance(node, File):
            node.durable = bytes(node.data)
            node.history = []
        else:
            node.durable = dict(node.entries)
            self.pending = [item for item in self.pending if item[0] != ino]

    # --- what a power cut leaves ---

    def crash(self, data="durable", meta="durable", rng=None):
        """The tree a power cut now may leave, by the rules ``data`` and ``meta``.

        ``rng`` (a ``random.Random``) makes the choices of the rules
        ``prefix``, ``pages`` and ``subset``. Returns the tree from the root
        (see :func:`read_tree`).
        """
        if data not in DATA_RULES or meta not in META_RULES:
            raise ValueError("unknown rule %r / %r" % (data, meta))
        entries = self._entries(meta, rng)
        contents = {}

        def build(ino, seen):
            tree = {}
            for name, child in entries.get(ino, {}).items():
                node = self.nodes[child]
                if isinstance(node, Directory):
                    if child not in seen:  # a directory moved between two others may show twice
                        tree[name] = build(child, seen | {child})
                else:
                    if child not in contents:
                        contents[child] = file_after_cut(node, data, rng)
                    tree[name] = contents[child]
            return tree

        return build(ROOT, frozenset([ROOT]))

    def _entries(self, meta, rng):
        """Each directory's entries after a cut: the durable ones and the pending that survive."""
        entries = {
            ino: dict(node.durable)
            for ino, node in self.nodes.items()
            if isinstance(node, Directory)
        }
        if meta == "all":
            kept = self.pending
        elif meta == "prefix":
            kept = self.pending[: rng.randint(0, len(self.pending))]
        elif meta == "subset":
            kept = [item for item in self.pending if rng.random() < 0.5]
        else:
            kept = []
        for ino, operation in kept:
            table = entries[ino]
            if operation[0] == "link":
                table[operation[1]] = operation[2]
            elif operation[0] == "unlink":
                table.pop(operation[1], None)
            else:  # a rename in one directory: both names change, or neither
                table.pop(operation[1], None)
                table[operation[2]] = operation[3]
        return entries

    def volatile_tree(self):
        """The tree processes see now (what a killed process leaves)."""
        return self.crash("all", "all")

    def durable_tree(self):
        """The tree of durable state alone."""
        return self.crash("durable", "durable")


def file_after_cut(node, rule, rng):
    """The bytes of the file ``node`` after a power cut, by the data rule ``rule``."""
    if rule == "all":
        return bytes(node.data)
    if rule == "durable" or not node.history:
        return node.durable
    if rule == "zeros":
        # Sizes persisted, data not: what the file lost since stays lost, what it grew by is zeros.
        low = min([len(node.durable)] + [event[1] for event in node.history if event[0] == "size"])
        kept = node.durable[:low]
        size = len(node.data)
        return kept[:size] + bytes(max(size - len(kept), 0))
    if rule == "prefix":
        pieces = page_pieces(node.history)
        content = bytearray(node.durable)
        for event in pieces[: rng.randint(0, len(pieces))]:
            apply_event(content, event)
        return bytes(content)
    return _pages_after_cut(node, rng)


def page_pieces(history):
    """The events of ``history`` with each write cut at page boundaries."""
    pieces = []
    for event in history:
        if event[0] != "write":
            pieces.append(event)
            continue
        _, offset, data = event
        start = 0
        while start < len(data):
            end = min(len(data), (offset + start) // PAGE * PAGE + PAGE - offset)
            pieces.append(("write", offset + start, data[start:end]))
            start = end
    return pieces


def apply_event(content, event):
    """Apply one history event to the bytearray ``content``."""
    if event[0] == "write":
        _, offset, data = event
        if len(content) < offset:
            content.extend(bytes(offset - len(content)))
        content[offset : offset + len(data)] = data
    else:
        size = event[1]
        if size < len(content):
            del content[size:]
        else:
            content.extend(bytes(size - len(content)))


def _page(content, number):
    """Page ``number`` of ``content``, padded with zeros to a full page."""
    part = bytes(content[number * PAGE : (number + 1) * PAGE])
    return part + bytes(PAGE - len(part))


def _pages_after_cut(node, rng):
    """The ``pages`` rule: any size of the file since its fsync, any version of each page."""
    content = bytearray(node.durable)
    sizes = [len(content)]
    versions = {}
    for event in node.history:
        if event[0] == "write":
            touched = range(event[1] // PAGE, (event[1] + max(len(event[2]), 1) - 1) // PAGE + 1)
        else:
            low, high = sorted((event[1], len(content)))
            touched = range(low // PAGE, high // PAGE + 1)
        for number in touched:
            if number not in versions:
                versions[number] = [_page(content, number)]
        apply_event(content, event)
        for number in touched:
            versions[number].append(_page(content, number))
        sizes.append(len(content))
    size = rng.choice(sizes)
    out = bytearray()
    for number in range((size + PAGE - 1) // PAGE):
        if number in versions:
            out += rng.choice(versions[number])
        else:
            out += _page(node.durable, number)
    return bytes(out[:size])


# --- trees on a real disk ---


def read_tree(path):
    """The files under ``path`` as a tree: {name: bytes for a file, or a dict for a directory}."""
    tree = {}
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full):
            tree[name] = read_tree(full)
        else:
            with open(full, "rb") as stream:
                tree[name] = stream.read()
    return tree


def write_tree(tree, path):
    """Make the tree ``tree`` at ``path`` (a directory that must not exist)."""
    os.mkdir(path)
    for name, item in tree.items():
        full = os.path.join(path, name)
        if isinstance(item, dict):
            write_tree(item, full)
        else:
            with open(full, "wb") as stream:
                stream.write(item)


def tree_digest(tree):
    """A digest that two trees share only if they hold the same names and bytes."""
    digest = hashlib.sha256()

    def feed(subtree):
        for name in sorted(subtree):
            item = subtree[name]
            digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
            if isinstance(item, dict):
                digest.update(b"d")
                feed(item)
                digest.update(b"u")
            else:
                digest.update(b"f%d:" % len(item))
                digest.update(item)

    feed(tree)
    return digest.hexdigest()


def describe_tree(tree, indent=""):
    """The tree as indented lines, files with their sizes: for failure reports."""
    lines = []
    for name in sorted(tree):
        item = tree[name]
        if isinstance(item, dict):
            lines.append("%s%s/" % (indent, name))
            lines.extend(describe_tree(item, indent + "  "))
        else:
            lines.append("%s%s (%d bytes)" % (indent, name, len(item)))
    return lines
