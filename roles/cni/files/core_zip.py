"""Pack the collection's Python core (plugins/module_utils and its
subpackages) as the package ovn4nfv_k8s into one zip, byte-identical for
identical sources (fixed timestamps, sorted names), so that copying it to a
node is one idempotent step and Python imports from it as it is
(zipimport)."""

import os
import sys
import zipfile

source, target = sys.argv[1], sys.argv[2]
names = []
for folder, subfolders, files in os.walk(source):
    subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
    names.extend(os.path.relpath(os.path.join(folder, f), source) for f in files if f.endswith(".py"))
tmp = target + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
    for name in sorted(names):
        info = zipfile.ZipInfo("ovn4nfv_k8s/" + name.replace(os.sep, "/"), date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(os.path.join(source, name), "rb") as handle:
            archive.writestr(info, handle.read())
os.replace(tmp, target)
