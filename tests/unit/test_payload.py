"""Every module ships the core files it needs, and no other.

AnsiballZ packs a module with every core file its finder
(``ansible.executor.module_common.recursive_finder``) reaches from the
module's imports. That finder follows every import it sees, a lazy one
inside a function too (it calls those optional, but ships them when they
are found): a feature imported lazily by a shared file (``_ansible.py``)
used to ride along with every module, ``ovs_bridge`` shipping the audit,
the picture, the trace and a daemon's settings.

What a module **needs** is defined mechanically, from the source, with
``ast``: the closure of the imports that run when the module is imported,
that is, every ``import`` / ``from ... import`` of a core file outside a
function or lambda body (at module level, including inside a module-level
``if``, ``try`` or class body), followed from the module into each core
file it reaches, with the package ``__init__.py`` files that importing
them runs. ``from package import name`` needs ``package/name.py`` when
that file exists, and the package otherwise (``name`` is then an
attribute). An import inside a function is not in the closure, so a lazy
import of a core file anywhere a module reaches fails here: import it at
the top of the file that uses it, or move the code into the module's own
core file.

The payload is what Ansible's own finder packs (run in a child process,
where Ansible's collection loader may take over ``ansible_collections``
imports), restricted to ``plugins/module_utils/``. Each module's payload
must be exactly its closure. ``pytest tests/unit/test_payload.py -rP``
prints each module's payload: core files (``__init__.py`` files, empty,
not counted), bytes and lines.
"""

import ast
import datetime
import glob
import io
import json
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = dict((os.path.basename(p)[:-3], p) for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
PACKAGE = "ansible_collections.ovn4nfv.k8s.plugins"
CORE = PACKAGE + ".module_utils"
CORE_DIR = os.path.join(ROOT, "plugins", "module_utils")


def core_path(name):
    """The file of core module (or package) ``name``, relative to
    module_utils (``cluster/trace.py``, ``cluster/__init__.py``), or None
    when ``name`` is not one (an attribute, or outside the core)."""
    if name == CORE:
        return "__init__.py"
    if not name.startswith(CORE + "."):
        return None
    rel = name[len(CORE) + 1:].replace(".", "/")
    for candidate in (rel + ".py", rel + "/__init__.py"):
        if os.path.isfile(os.path.join(CORE_DIR, candidate)):
            return candidate
    return None


def imports_run_on_import(tree):
    """The import statements Python runs when it imports a file: those
    outside any function or lambda body."""
    found = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child)
    visit(tree)
    return found


def imported_names(fqn, is_package, node):
    """The dotted names an import statement in module ``fqn`` reaches:
    ``from X import a`` gives ``X.a`` (a submodule, if there is one) and
    ``X``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = fqn.split(".")
        base = parts if is_package else parts[:-1]
        base = base[:len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module
    return [module] + ["%s.%s" % (module, alias.name) for alias in node.names]


def closure(module_path, module_fqn):
    """The core files (relative to module_utils) that importing the module
    at ``module_path`` runs; see the module docstring."""
    needed, todo = set(), [(module_fqn, module_path, False)]
    seen = set()
    while todo:
        fqn, path, is_package = todo.pop()
        if fqn in seen:
            continue
        seen.add(fqn)
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        for node in imports_run_on_import(tree):
            for name in imported_names(fqn, is_package, node):
                rel = core_path(name)
                if rel is None:
                    continue
                # importing a.b.c runs a/__init__.py and a/b/__init__.py first
                parts = name.split(".")
                for depth in range(len(CORE.split(".")), len(parts)):
                    package = ".".join(parts[:depth])
                    needed.add(core_path(package))
                    todo.append((package, os.path.join(CORE_DIR, core_path(package)), True))
                needed.add(rel)
                todo.append((name, os.path.join(CORE_DIR, rel), rel.endswith("__init__.py")))
    return needed


def shipped(tree, modules):
    """``{name: [core files AnsiballZ packs]}`` for each module of
    ``modules`` (``{name: path}``), from Ansible's own finder, with the
    collection at ``tree`` (a directory holding
    ``ansible_collections/ovn4nfv/k8s``). Ansible's collection loader
    takes this process's ``ansible_collections`` imports over: call it in a
    child (``python this_file.py TREE [NAME=PATH ...]``, :func:`payloads_of`)."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    from ansible.executor import module_common
    from ansible._internal._ansiballz import _builder
    _AnsibleCollectionFinder(paths=[tree])._install()
    prefix = CORE.replace(".", "/") + "/"
    out = {}
    for name, path in sorted(modules.items()):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            with open(path, "rb") as handle:
                module_common.recursive_finder(name, "%s.modules.%s" % (PACKAGE, name), handle.read(), archive,
                                               datetime.datetime.now(datetime.timezone.utc),
                                               _builder.ExtensionManager())
            out[name] = sorted(i.filename[len(prefix):] for i in archive.infolist()
                               if i.filename.startswith(prefix))
    return out


def payloads_of(tree, modules=None):
    """:func:`shipped`, run in a child process; ``modules`` (``{name:
    path}``): by default the collection's."""
    args = ["%s=%s" % item for item in sorted((modules or {}).items())]
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), tree] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def payloads(collections_path):
    return payloads_of(collections_path)


def measure(files):
    """(core files, bytes, lines) of a payload, ``__init__.py`` files not
    counted (they are empty)."""
    counted = [f for f in files if os.path.basename(f) != "__init__.py"]
    size = lines = 0
    for rel in counted:
        with open(os.path.join(CORE_DIR, rel), "rb") as handle:
            data = handle.read()
        size, lines = size + len(data), lines + data.count(b"\n")
    return len(counted), size, lines


def test_the_finder_sees_every_module(payloads):
    assert sorted(payloads) == sorted(MODULES)
    assert all("_ansible.py" in files for files in payloads.values()), "a module without the glue?"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_ships_exactly_its_import_closure(payloads, name):
    needed = closure(MODULES[name], "%s.modules.%s" % (PACKAGE, name))
    files = set(payloads[name])
    assert not files - needed, "%s ships core files its import closure does not need (a lazy import?): %s" % (
        name, sorted(files - needed))
    assert not needed - files, "%s needs core files AnsiballZ does not ship: %s" % (name, sorted(needed - files))


def test_ovs_bridge_ships_no_cluster_node_or_daemon_file(payloads):
    assert [f for f in payloads["ovs_bridge"] if f.split("/")[0] in ("cluster", "node", "daemons")] == []


def test_a_lazy_import_is_shipped_but_not_needed(collections_path, tmp_path):
    """The rule has teeth: a module whose function imports a core file
    lazily ships it (Ansible's finder follows the import) while its closure
    does not hold it, so the test above would fail for it."""
    module = tmp_path / "lazy.py"
    module.write_text("from %s._ansible import fail\n\n\ndef main():\n"
                      "    from %s.cluster import trace\n" % (CORE, CORE))
    files = set(payloads_of(collections_path, {"lazy": str(module)})["lazy"])
    needed = closure(str(module), PACKAGE + ".modules.lazy")
    assert "_ansible.py" in needed and "cluster/trace.py" not in needed
    assert "cluster/trace.py" in files - needed


def test_print_each_payload(payloads):
    """The table (``-rP`` shows it); no module ships the whole core."""
    everything = measure(os.path.relpath(path, CORE_DIR)
                         for path in glob.glob(os.path.join(CORE_DIR, "**", "*.py"), recursive=True))
    print("%-26s %5s %8s %7s" % ("module", "files", "bytes", "lines"))
    for name in sorted(payloads):
        print("%-26s %5d %8d %7d" % ((name,) + measure(payloads[name])))
        assert measure(payloads[name])[0] < everything[0], name
    print("%-26s %5d %8d %7d" % (("(the whole core)",) + everything))


if __name__ == "__main__":
    json.dump(shipped(sys.argv[1], dict(arg.split("=", 1) for arg in sys.argv[2:]) or MODULES), sys.stdout)
