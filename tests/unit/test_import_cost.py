"""What a module run pays before it does anything: importing the OVSDB
core must not import ``pkg_resources`` (pbr's way to find ovsdbapp's
version, which scans every installed distribution: 60-90 ms of each run),
and ovsdbapp must still know its version."""

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.ovsdb import connection
import ovsdbapp
from importlib import metadata
print(json.dumps({"has_ovsdbapp": connection.HAS_OVSDBAPP, "pkg_resources": "pkg_resources" in sys.modules,
                  "version": ovsdbapp.__version__, "installed": metadata.version("ovsdbapp")}))
"""


def test_the_ovsdb_core_imports_without_pkg_resources(collections_path):
    # a fresh interpreter: this one may have imported pkg_resources already
    out = subprocess.run([sys.executable, "-c", PROBE], env=dict(os.environ, PYTHONPATH=collections_path),
                         check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
    found = json.loads(out)
    assert found["has_ovsdbapp"]
    assert not found["pkg_resources"]
    assert found["version"] == found["installed"]
