"""Shared test code has one home and one way in; the lists of benchmarks
cannot drift from the benchmarks.

- Code that tests, benchmarks and the lab share lives in ``tests/harness/``
  and is imported as ``tests.harness.<name>``, never by a bare module name
  off a path someone inserted.
- ``sys.path`` is changed in one place: ``tests/harness/collection.py``,
  which also builds every collection tree (the checkout as
  ``ansible_collections/ovn4nfv/k8s``).
- ``make bench``, the README and the testing guide name every benchmark in
  ``benchmarks/``, and nothing else; ``percentile`` is defined once.
"""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(ROOT, "tests", "harness")
ENTRY = os.path.join(HARNESS, "collection.py")
SCANNED = ("tests", "benchmarks", "lab")
# a change to sys.path: insert, append, extend, or an assignment to it or a slice
PATH_CHANGE = re.compile(r"\bsys\.path\s*(\.\s*(insert|append|extend)\b|(\[[^\]]*\])?\s*\+?=(?!=))")
TREE_LINK = re.compile(r"""["']ansible_collections["']\s*,\s*["']ovn4nfv["']""")
BENCH_LINE = "make bench"


def text_files(*tops):
    """(relative path, text) of every text file under ``tops``, caches and
    binary files left out."""
    for top in tops:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    with open(path, encoding="utf-8") as handle:
                        text = handle.read()
                except (UnicodeDecodeError, OSError):
                    continue
                yield os.path.relpath(path, ROOT), text


def harness_modules():
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HARNESS, "*.py"))
                  if not p.endswith("__init__.py"))


def test_shared_code_is_in_the_harness_only():
    top = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "tests", "*.py")))
    assert top == ["__init__.py", "conftest.py"], (
        "shared test code goes in tests/harness/, imported as tests.harness.<name>: %s" % top)
    for name in ("collection", "sandbox", "kube_api_standin", "watcher_env", "cni_env", "cni_runtime"):
        assert name in harness_modules()


def test_sys_path_is_changed_in_one_place():
    found = []
    for rel, text in text_files(*SCANNED):
        for number, line in enumerate(text.splitlines(), 1):
            if PATH_CHANGE.search(line):
                found.append((rel, number, line.strip()))
    entry = os.path.relpath(ENTRY, ROOT)
    assert [f for f in found if f[0] != entry] == [], (
        "only %s changes sys.path (import tests.harness, or pass PYTHONPATH to a child)" % entry)
    assert len([f for f in found if f[0] == entry]) == 1, found


def test_the_collection_tree_is_built_in_one_place():
    entry = os.path.relpath(ENTRY, ROOT)
    found = [(rel, number) for rel, text in text_files(*SCANNED)
             for number, line in enumerate(text.splitlines(), 1) if TREE_LINK.search(line)]
    assert [f for f in found if f[0] != entry] == [], (
        "build collection trees with tests.harness.collection.build(), not by hand")


def test_the_harness_is_imported_one_way():
    bare = re.compile(r"^\s*(from|import)\s+(%s)\b" % "|".join(harness_modules()), re.M)
    found = [(rel, m.group(0).strip()) for rel, text in text_files(*SCANNED) if rel.endswith(".py")
             for m in bare.finditer(text)]
    assert found == [], "import shared code as tests.harness.<name>"


def test_the_tree_links_to_this_checkout(tmp_path):
    from tests.harness import collection
    parent = collection.build(str(tmp_path / "tree"))
    link = parent + "/ansible_collections/ovn4nfv/k8s"
    assert os.path.realpath(link) == os.path.realpath(ROOT)
    assert collection.build(parent) == parent          # kept, not made again
    collection.remove(parent)
    assert not os.path.exists(parent) and os.path.exists(os.path.join(ROOT, "galaxy.yml"))
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import naming
    assert os.path.realpath(naming.__file__).startswith(os.path.realpath(ROOT) + os.sep)


def benchmarks():
    """Every benchmark: a file of benchmarks/ that runs as a program."""
    out = set()
    for path in glob.glob(os.path.join(ROOT, "benchmarks", "*.py")):
        with open(path) as handle:
            if re.search(r"^if __name__ == .__main__.:", handle.read(), re.M):
                out.add(os.path.basename(path)[:-3])
    return out


def make_bench():
    """The modules ``make bench`` runs, in order."""
    with open(os.path.join(ROOT, "Makefile")) as handle:
        text = handle.read()
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, "the Makefile has no bench target"
    lines = recipe.group(1).splitlines()
    modules = [re.fullmatch(r"\t\$\(PY\) -m benchmarks\.(\w+)", line) for line in lines]
    assert all(modules), ("each line of bench runs one benchmark as a module", lines)
    return [m.group(1) for m in modules]


def listed(relpath):
    """The benchmarks a document's ``make bench`` line names."""
    with open(os.path.join(ROOT, relpath)) as handle:
        lines = [line for line in handle if BENCH_LINE in line and "#" in line]
    assert len(lines) == 1, (relpath, lines)
    return re.findall(r"(\w+)\.py", lines[0].split("#", 1)[1])


def test_benchmarks_exist():
    assert {"ovsdb_bulk", "watcher", "scale"} <= benchmarks()
    assert "common" not in benchmarks()


def test_make_bench_runs_every_benchmark_once():
    runs = make_bench()
    assert len(runs) == len(set(runs)), runs
    assert set(runs) == benchmarks()


@pytest.mark.parametrize("relpath", ["README.md", os.path.join("docs", "docsite", "rst", "testing.rst")])
def test_the_docs_list_every_benchmark_as_make_bench_runs_them(relpath):
    assert listed(relpath) == make_bench(), relpath


def test_percentile_is_defined_once():
    found = [rel for rel, text in text_files(*SCANNED) if rel.endswith(".py")
             and re.search(r"^\s*def percentile\(", text, re.M)]
    assert found == [os.path.join("benchmarks", "common.py")]
