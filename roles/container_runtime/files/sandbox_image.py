"""Make the pod sandbox image the container runtime's CRI runs for every
pod (its "pause" image) from a static binary of Debian's, with nothing to
download: an OCI image archive of one layer holding that binary, its
entry point the binary with its arguments.

    python3 sandbox_image.py ARCHIVE NAME BINARY [ARG...]

Debian's catatonit (``catatonit -P``: a process that waits, reaping
nothing, as the pause container does) is the one the role uses. The
archive is the same bytes for the same binary (fixed times and owners),
so that importing it again changes nothing.
"""

import hashlib
import io
import json
import os
import sys
import tarfile


def _layer(binary):
    """A tar of ``binary`` at the image's root, deterministic."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(os.path.basename(binary))
        info.mode, info.mtime, info.uid, info.gid = 0o755, 0, 0, 0
        with open(binary, "rb") as handle:
            data = handle.read()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def build(name, binary, args):
    """The archive's files: {path: bytes}."""
    layer_digest, layer = _blob(_layer(binary))
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/" + os.path.basename(binary)] + list(args), "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "ovn4nfv sandbox_image.py from " + binary}]}, sort_keys=True).encode()
    config_digest, config = _blob(config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest,
                    "size": len(layer)}]}, sort_keys=True).encode()
    manifest_digest, manifest = _blob(manifest)
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
        "size": len(manifest), "annotations": {"io.containerd.image.name": name,
                                               "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}]},
        sort_keys=True).encode()
    files = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}', "index.json": index}
    for digest, data in ((layer_digest, layer), (config_digest, config), (manifest_digest, manifest)):
        files["blobs/sha256/" + digest.split(":", 1)[1]] = data
    return files


def write(archive, files):
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.mode, info.mtime, info.size = 0o644, 0, len(files[path])
            tar.addfile(info, io.BytesIO(files[path]))


def main(argv):
    if len(argv) < 4:
        raise SystemExit(__doc__)
    write(argv[1], build(argv[2], argv[3], argv[4:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
