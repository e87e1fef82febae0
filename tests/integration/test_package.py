"""The collection as a user gets it: built with ``ansible-galaxy collection
build``, installed into a clean collections path, then documented by
``ansible-doc`` and used by a playbook from that installed copy alone.

A file missing from the tarball (a subpackage of the core, a role's file,
the runtime metadata) fails here, where the working-tree tests would pass.
"""

import glob
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
import yaml

from tests.harness.playbook import ansible_env, run_playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))


def galaxy():
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)


def run(cmd, env, cwd=None):
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, "%s failed:\n%s" % (" ".join(cmd), proc.stdout[-4000:])
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, collections path holding only the installed copy, env)."""
    work = tmp_path_factory.mktemp("package")
    home = str(work / "home")
    os.makedirs(os.path.join(home, "tmp"))
    clean = str(work / "collections")
    env = ansible_env(clean, home)
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(work), ROOT], env)
    meta = galaxy()
    tarball = str(work / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"])))
    assert os.path.exists(tarball)
    # Galaxy is out of reach: the dependencies come from the ansible package,
    # checked in test_dependencies_are_satisfied.
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--no-deps", "-p", clean, tarball], env)
    return tarball, clean, env


def test_tarball_holds_the_collection_and_nothing_else(installed):
    tarball, _clean, _env = installed
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    for wanted in ("LICENSE", "LICENSES/GPL-3.0-or-later.txt", "meta/runtime.yml", "meta/execution-environment.yml",
                   "bindep.txt", "requirements.txt", "CHANGELOG.rst", "roles/cni/files/core_zip.py",
                   "plugins/module_utils/ovsdb/plan.py", "plugins/module_utils/daemons/watcher.py",
                   "plugins/module_utils/cni.py", "plugins/modules/virtual_network.py"):
        assert wanted in names, wanted
    for unwanted in ("lab", "benchmarks", ".ci", "Makefile", ".venv", "pytest.ini", "requirements-test.txt"):
        assert not [n for n in names if n == unwanted or n.startswith(unwanted + "/")], unwanted
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_dependencies_are_satisfied(installed):
    """Every collection galaxy.yml depends on is present, at a version its
    range admits, where the installed collection runs."""
    _tarball, clean, env = installed
    listing = json.loads(run([os.path.join(BIN, "ansible-galaxy"), "collection", "list", "--format", "json"], env))
    found = {}
    for collections in listing.values():
        for name, info in collections.items():
            found.setdefault(name, info["version"])
    assert found.get("ovn4nfv.k8s") == galaxy()["version"]
    from ansible.galaxy.dependency_resolution.versioning import meets_requirements
    for name, wanted in galaxy()["dependencies"].items():
        assert name in found, "%s is not installed" % name
        assert meets_requirements(found[name], wanted), "%s %s does not meet %s" % (name, found[name], wanted)


def test_ansible_doc_reads_every_module_from_the_installed_copy(installed):
    _tarball, clean, env = installed
    docs = json.loads(run([os.path.join(BIN, "ansible-doc", ), "--json"] +
                          ["ovn4nfv.k8s." + m for m in MODULES], env))
    assert sorted(docs) == ["ovn4nfv.k8s." + m for m in MODULES]
    for name, doc in docs.items():
        assert doc["doc"]["filename"].startswith(clean + os.sep), (name, doc["doc"]["filename"])
        assert doc["examples"] and doc["return"], name
    roles = run([os.path.join(BIN, "ansible-doc"), "--type", "role", "--list", "ovn4nfv.k8s"], env)
    for role in ("ovs", "ovn_central", "ovn_controller", "node_gateway", "cni", "container_runtime", "watcher"):
        assert "ovn4nfv.k8s." + role in roles, roles


def test_a_playbook_runs_the_installed_modules_and_roles(installed, sandbox, tmp_path):
    """Modules write a real NB and OVS; the cni role packs the installed
    core (every subpackage) into the zip the nodes run, which imports."""
    _tarball, clean, _env = installed
    lib = str(tmp_path / "lib")
    tasks = [
        {"name": "topology", "ovn4nfv.k8s.cluster_topology": {"db": sandbox.nb_db}},
        {"name": "network", "ovn4nfv.k8s.virtual_network": {
            "db": sandbox.nb_db, "ovs_db": sandbox.ovs_db,
            "config": [{"name": "pkg-net", "subnet": "10.77.0.0/24", "backend": "ovn"}]}},
        {"name": "bridge", "ovn4nfv.k8s.ovs_bridge": {
            "db": sandbox.ovs_db, "config": [{"name": "br-pkg", "datapath_type": "netdev"}]}},
        {"name": "core", "ansible.builtin.include_role": {"name": "ovn4nfv.k8s.cni", "tasks_from": "package"}},
    ]
    tmp = str(tmp_path / "controller-tmp")
    os.makedirs(tmp)
    results, proc = run_playbook(clean, tasks, extra_vars={"cni_lib_dir": lib}, env={"TMPDIR": tmp})
    assert "failed=0" in proc.stdout, proc.stdout[-4000:]
    assert results["network"]["changed"] and results["bridge"]["changed"]
    assert "pkg-net" in sandbox.nbctl("ls-list")
    assert sandbox.vsctl("br-exists", "br-pkg") == ""
    core = os.path.join(lib, "ovn4nfv_k8s.zip")
    with zipfile.ZipFile(core) as archive:
        packed = set(archive.namelist())
    for sub in ("common", "ovsdb", "resources", "cluster", "node", "daemons"):
        assert "ovn4nfv_k8s/%s/__init__.py" % sub in packed, sub
    imported = subprocess.run(
        [sys.executable, "-c", "import ovn4nfv_k8s.daemons.watcher, ovn4nfv_k8s.daemons.node_agent, "
         "ovn4nfv_k8s.cni; print(ovn4nfv_k8s.daemons.watcher.__file__)"],
        env=dict(os.environ, PYTHONPATH=core), cwd=str(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
    assert imported.returncode == 0 and imported.stdout.startswith(core), imported.stdout
    assert not [n for n in os.listdir(tmp) if n.startswith("ovn4nfv-core-")], "the controller's directory is gone"
