"""Pack the collection's Python core (plugins/module_utils) as the package
ovn4nfv_k8s into one zip, byte-identical for identical sources (fixed
timestamps, sorted names), so that copying it to a node is one idempotent
step and Python imports from it as it is (zipimport)."""

import os
import sys
import zipfile

source, target = sys.argv[1], sys.argv[2]
names = sorted(n for n in os.listdir(source) if n.endswith(".py"))
tmp = target + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
    for name in names:
        info = zipfile.ZipInfo("ovn4nfv_k8s/" + name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(os.path.join(source, name), "rb") as handle:
            archive.writestr(info, handle.read())
os.replace(tmp, target)
