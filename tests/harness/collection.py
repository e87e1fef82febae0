"""The collection tree: this checkout as ``ansible_collections/ovn4nfv/k8s``.

Ansible finds a collection, and Python imports the core, only under a
directory named ``ansible_collections/<namespace>/<name>``; the checkout is
not one. A tree is a directory holding that path as a symbolic link to the
checkout, so that tests, benchmarks, ``ansible-playbook``, ``ansible-doc``
and the lab all use the code as it is in the working tree, never an
installed copy.

- :func:`build` makes a tree in a directory (``ANSIBLE_COLLECTIONS_PATH``
  for a playbook run, or ``PYTHONPATH`` for a daemon run as a process),
  of this checkout or of another copy of the collection (a previous
  release's, extracted by ``tests/contract/record.py``);
- :func:`importable` makes this process's tree once and puts it first on
  ``sys.path``: importing :mod:`tests.harness` calls it, so whatever imports
  the harness (pytest's conftest, a benchmark, the lab) can import
  ``ansible_collections.ovn4nfv.k8s`` next. This is the one place in tests/,
  benchmarks/ and lab/ that changes ``sys.path``
  (``tests/unit/test_harness_layout.py`` keeps it so).
"""

import atexit
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMESPACE, NAME = "ovn4nfv", "k8s"

_made = {}


def link(parent):
    """Where the tree in ``parent`` links to the checkout."""
    return os.path.join(parent, "ansible_collections", NAMESPACE, NAME)


def build(parent=None, target=ROOT):
    """Make ``parent`` (a new temporary directory when None) a tree whose
    ``ovn4nfv/k8s`` is ``target`` (this checkout, unless another copy of
    the collection is named); keep one already there. Returns ``parent``."""
    parent = parent or tempfile.mkdtemp(prefix="ovn4nfv-collections-")
    path = link(parent)
    if not os.path.islink(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)
    return parent


def remove(parent):
    """Remove a tree :func:`build` made: the link first, so that nothing can
    follow it into the checkout, then the directory."""
    try:
        os.unlink(link(parent))
    except OSError:
        pass
    shutil.rmtree(parent, ignore_errors=True)


def _serves(entry):
    path = link(entry or ".")
    return os.path.islink(path) and os.path.realpath(path) == os.path.realpath(ROOT)


def importable():
    """The tree ``ansible_collections.ovn4nfv.k8s`` is imported from in this
    process, first on ``sys.path``. One already on the path (a process
    started with ``PYTHONPATH`` naming a tree) is used as it is; otherwise
    one is made, once per process, and removed by :func:`discard` or when
    the process that made it exits (not by a child it forked)."""
    if "tree" in _made:
        return _made["tree"]
    for entry in sys.path:
        if _serves(entry):
            _made.update(tree=entry, owner=None)
            return entry
    tree = build()
    sys.path.insert(0, tree)
    _made.update(tree=tree, owner=os.getpid())
    atexit.register(discard)
    return tree


def discard():
    """Remove the tree :func:`importable` made in this process, if it made
    one (the modules already imported from it stay usable)."""
    if _made.get("owner") == os.getpid():
        remove(_made["tree"])
        _made["owner"] = None
