"""The core's layout is its architecture: layers as subpackages, arrows
pointing down only, no cycle, small files, thin modules, and a README that
names every file as it is."""

import ast
import glob
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "plugins", "module_utils")
# Lower layers first: a file may import from its own layer or a lower one.
LAYERS = ["common", "ovsdb", "resources", "cluster", "node", "daemons", "_ansible"]
# cni.py is the CNI entry point: it stands alone (standard library only),
# but for the core modules in STANDALONE, which are standard library only
# themselves and import nothing of the core.
LAYER_OF = {"cni": 0}
STANDALONE = {"common.jsontext", "common.marks"}


def core_files():
    out = {}
    for path in glob.glob(os.path.join(CORE, "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, CORE)[:-3].replace(os.sep, ".")
        if rel.endswith("__init__"):
            continue
        out[rel] = path
    return out


def layer(module):
    top = module.split(".")[0]
    return LAYER_OF[top] if top in LAYER_OF else LAYERS.index(top)


def imports_of(module, path):
    """Core modules that ``module`` imports (relative imports resolved)."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    package = module.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - (node.level - 1)] if node.level > 1 else list(package)
            target = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                candidate = ".".join(target + [alias.name])
                found.add(candidate if candidate in core_files() else ".".join(target))
    return found


def code_lines(path):
    """The lines of ``path`` that hold code: blank lines, comments and
    docstrings are not counted, so that the cap never squeezes prose."""
    with open(path) as handle:
        text = handle.read()
    prose = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            prose.update(range(body[0].lineno, body[0].end_lineno + 1))
    counted = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and number not in prose:
            counted += 1
    return counted


# A prompt to split a file along a seam once its code grows past this; its
# comments and docstrings are free, and never shortened to fit.
MAX_CODE_LINES = 400


def test_no_file_over_the_code_line_cap():
    long = dict((m, code_lines(p)) for m, p in core_files().items())
    assert not dict((m, n) for m, n in long.items() if n > MAX_CODE_LINES)


def test_no_two_core_files_share_a_base_name():
    """One name, one place: a reader never has to ask which ``taps`` or
    ``audit`` an import means, and no import alias tells them apart."""
    seen = {}
    for module in sorted(core_files()):
        seen.setdefault(module.split(".")[-1], []).append(module)
    assert not dict((b, m) for b, m in seen.items() if len(m) > 1)


def test_every_subpackage_is_a_package():
    for folder in glob.glob(os.path.join(CORE, "*", "")):
        if "__pycache__" not in folder:
            assert os.path.exists(os.path.join(folder, "__init__.py")), folder


def test_arrows_point_down_and_there_is_no_cycle():
    files = core_files()
    graph = dict((m, imports_of(m, p)) for m, p in files.items())
    for module, targets in graph.items():
        for target in targets:
            assert target in files, "%s imports %s, which is not a core module" % (module, target)
            assert layer(target) <= layer(module), "%s (layer %s) imports %s from above" % (
                module, module.split(".")[0], target)
    state = {}

    def visit(module, trail):
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", "import cycle: " + " -> ".join(trail + [module])
        state[module] = "open"
        for target in sorted(graph[module]):
            visit(target, trail + [module])
        state[module] = "done"

    for module in sorted(graph):
        visit(module, [])


def test_the_core_is_free_of_ansible_and_cni_of_everything_but_the_standard_library():
    for module, path in core_files().items():
        with open(path) as handle:
            tree = ast.parse(handle.read())
        absolute = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                absolute.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                absolute.add(node.module.split(".")[0])
        if module != "_ansible":
            assert "ansible" not in absolute and "ansible_collections" not in absolute, module
        if module == "cni" or module in STANDALONE:
            assert absolute <= set(sys.stdlib_module_names) | {"__future__"}, absolute
            relative = imports_of(module, path)
            assert relative <= (STANDALONE if module == "cni" else set()), (module, relative)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))),
                         ids=os.path.basename)
def test_modules_are_thin(path):
    """Documentation, an argument spec and one call into the core: any
    function besides main() is a few lines of glue."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name != "main":
            assert node.end_lineno - node.lineno < 8, "%s: %s holds logic" % (path, node.name)
        assert not isinstance(node, ast.ClassDef), "%s: class %s belongs in the core" % (path, node.name)


def test_readme_layout_names_every_core_file():
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("    plugins/module_utils/", 1)[1].split("    plugins/modules/", 1)[0]
    named = set(re.findall(r"^\s+(\S+\.py)\b", block, re.M))
    actual = set(os.path.relpath(p, CORE) for p in core_files().values())
    assert named == actual, "README names %s; the tree has %s" % (
        sorted(named - actual), sorted(actual - named))


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "playbooks", "files", "*.py"))
                                        + glob.glob(os.path.join(ROOT, "lab", "*.py"))),
                         ids=lambda path: os.path.relpath(path, ROOT))
def test_no_function_is_defined_twice(path):
    """A second ``def`` of a name silently replaces the first: pylint's
    sanity does not read the playbooks' helpers nor the lab (a second
    ``reach`` in probe.py once broke verify.yml's Service rows)."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert not sorted(set(n for n in names if names.count(n) > 1)), path
