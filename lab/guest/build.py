"""The lab's VM guest, built from Debian's packages only: a kernel and a
busybox initramfs, no disk image and no download but Debian's own.

    python3 lab/guest/build.py [--out DIR] [--force]

What it takes, with ``apt-get download`` from the machine's apt sources:

* the kernel of ``linux-image-cloud-amd64`` (the versioned package it
  depends on): Debian's kernel for virtual machines, a quarter of the
  generic one's download, LZ4-compressed (fast to unpack under TCG), and
  the virtio modules its config builds as modules (``=m``: virtio_net and
  what it depends on, found in the modules' own ``.modinfo``, loaded in
  dependency order by the guest's init);
* ``busybox-static``: the whole userland (sh, ip, udhcpc, ping, nc, stty).

What it makes, in ``lab/guest/out/`` (gitignored; the node image's build
context, lab/, copies it to /usr/lib/ovn4nfv/guest/): ``vmlinuz``,
``initramfs.gz`` (a newc cpio written here, byte for byte reproducible:
no cpio binary, no root needed for /dev/console) and ``MANIFEST.json``
(the packages, the modules, the sizes, and the key of the inputs). The
build is skipped when the key matches: the key covers the packages'
versions, this script and the guest's files (init, inittab, console,
udhcpc.script), so that a new kernel in the archive or a changed init
builds again, and nothing else does.

Built once on the host and shared by every node image (Debian 12 and 13):
the guest needs nothing of the node's release, and one download is cheaper
in CI than one per image.
"""

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
KERNEL_PACKAGE = "linux-image-cloud-amd64"
BUSYBOX_PACKAGE = "busybox-static"
# The modules the guest's NIC needs; their dependencies are added from the
# modules themselves (virtio_ring, virtio, the PCI transports, failover...).
MODULES = ("virtio_pci", "virtio_net")
# The guest's own files: (name in this directory, path in the initramfs, mode)
FILES = (("init", "init", 0o755), ("inittab", "etc/inittab", 0o644),
         ("console", "usr/sbin/o4n-console", 0o755),
         ("udhcpc.script", "usr/share/udhcpc/default.script", 0o755))
DIRS = ("dev", "proc", "sys", "run", "tmp", "root", "etc", "lib/modules", "usr/sbin", "usr/share/udhcpc")
MANIFEST = "MANIFEST.json"


def log(message):
    print("guest: " + message, flush=True)


def _run(argv, cwd=None):
    result = subprocess.run(argv, cwd=cwd, check=False, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=600)
    if result.returncode:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(argv), result.returncode, result.stderr.strip()))
    return result.stdout


def _show(*names):
    """The candidate versions' fields of the packages ``names`` in the apt
    cache, by name, in one ``apt-cache`` call (a second after one ``apt-get
    update`` when the lists do not know one of them: a fresh CI machine)."""
    for attempt in (0, 1):
        result = subprocess.run(["apt-cache", "show", "--no-all-versions"] + list(names), check=False, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        found = {}
        for stanza in result.stdout.split("\n\n"):
            fields, key = {}, None
            for line in stanza.splitlines():
                if line[:1] in (" ", "\t") and key:
                    fields[key] += "\n" + line.strip()
                elif ":" in line:
                    key, value = line.split(":", 1)
                    fields[key] = value.strip()
            if "Package" in fields:
                found[fields["Package"]] = fields
        if result.returncode == 0 and all(n in found for n in names):
            return found
        if attempt:
            raise RuntimeError("apt-cache knows not all of %s: %s" % (" ".join(names), result.stderr.strip()))
        _run(["apt-get", "update", "-qq"])
    return {}


def packages():
    """The exact packages (name, version) the guest is made of: the kernel
    the metapackage depends on now (with its exact version), and
    busybox-static."""
    fields = _show(KERNEL_PACKAGE, BUSYBOX_PACKAGE)
    depends = fields[KERNEL_PACKAGE].get("Depends", "")
    found = re.search(r"(linux-image-[0-9][^ ,]*-cloud-amd64) \(= ([^)]+)\)", depends)
    if not found:
        raise RuntimeError("%s depends on no kernel of an exact version: %r" % (KERNEL_PACKAGE, depends))
    return [(found.group(1), found.group(2)), (BUSYBOX_PACKAGE, fields[BUSYBOX_PACKAGE]["Version"])]


def input_key(pkgs):
    """What the artifacts are a function of: the packages, this script and
    the guest's files."""
    digest = hashlib.sha256()
    digest.update(json.dumps([pkgs, list(MODULES)]).encode())
    for name in [os.path.basename(__file__)] + [f[0] for f in FILES]:
        with open(os.path.join(HERE, name), "rb") as handle:
            digest.update(name.encode() + b"\0" + handle.read())
    return digest.hexdigest()


# -- the kernel modules' own metadata -----------------------------------------

def modinfo(data):
    """The ``.modinfo`` section of a kernel module (ELF64, little endian):
    its ``key=value`` strings, as ``modinfo`` reads them."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 module")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for header in headers:
        start = names + header[0]
        if data[start:data.index(b"\0", start)] == b".modinfo":
            raw = data[header[4]:header[4] + header[5]]
            pairs = [item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item]
            info = {}
            for key, value in pairs:
                info.setdefault(key, value)
            return info
    return {}


def module_order(tree, roots):
    """The ``.ko`` files (paths under ``tree``, the unpacked kernel package)
    that ``roots`` need, each after what it depends on. A module the kernel
    has built in (modules.builtin) needs no file."""
    base = os.path.join(tree, "lib", "modules")
    release = os.listdir(base)[0]
    files = {}
    for dirpath, _dirs, names in os.walk(os.path.join(base, release, "kernel")):
        for name in names:
            if name.endswith(".ko"):
                files[name[:-3].replace("-", "_")] = os.path.join(dirpath, name)
    builtin = set()
    builtin_list = os.path.join(base, release, "modules.builtin")
    if os.path.exists(builtin_list):
        with open(builtin_list) as handle:
            builtin = {os.path.basename(line.strip())[:-3].replace("-", "_") for line in handle if line.strip()}
    order, seen = [], set()

    def visit(name, chain):
        if name in seen or name in builtin:
            return
        if name in chain:
            raise RuntimeError("module dependency cycle: %s" % " -> ".join(chain + [name]))
        if name not in files:
            raise RuntimeError("module %s is neither in %s nor built in" % (name, release))
        with open(files[name], "rb") as handle:
            depends = modinfo(handle.read()).get("depends", "")
        for dep in sorted(d for d in depends.split(",") if d):
            visit(dep.replace("-", "_"), chain + [name])
        seen.add(name)
        order.append((name, files[name]))

    for root in roots:
        visit(root, [])
    return release, order


# -- a newc cpio, written here ------------------------------------------------

class Cpio:
    """An initramfs archive (``cpio -H newc``) built in memory: every entry
    owned by root, mtime 0, so that the same inputs give the same bytes."""

    def __init__(self):
        self.data = bytearray()
        self.inode = 0

    def _entry(self, name, mode, body=b"", nlink=1, rdev=(0, 0)):
        self.inode += 1
        path = name.encode() + b"\0"
        fields = (self.inode, mode, 0, 0, nlink, 0, len(body), 0, 0, rdev[0], rdev[1], len(path), 0)
        self.data += b"070701" + b"".join(b"%08X" % f for f in fields) + path
        self.data += b"\0" * (-len(self.data) % 4) + body
        self.data += b"\0" * (-len(self.data) % 4)

    def directory(self, name):
        self._entry(name, stat.S_IFDIR | 0o755, nlink=2)

    def file(self, name, body, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, body)

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name, major, minor, mode=0o600):
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def finish(self):
        self._entry("TRAILER!!!", 0)
        return gzip.compress(bytes(self.data), 9, mtime=0)


def initramfs(busybox, applets, modules):
    """The guest's root: busybox and a link per applet, the modules and
    their load order, the guest's files, /dev/console (the kernel opens it
    for /init before devtmpfs is mounted)."""
    archive = Cpio()
    made = set()

    def parents(path):
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directory = "/".join(parts[:depth])
            if directory not in made:
                made.add(directory)
                archive.directory(directory)

    for directory in DIRS:
        parents(directory + "/x")
    parents("bin/busybox")
    archive.file("bin/busybox", busybox, 0o755)
    archive.char_device("dev/console", 5, 1)
    for applet in applets:
        if applet not in ("bin/busybox", "linuxrc"):
            parents(applet)
            archive.symlink(applet, "/bin/busybox")
    for name, body in modules:
        archive.file("lib/modules/%s.ko" % name, body)
    archive.file("lib/modules/load-order", "".join(name + "\n" for name, _body in modules).encode())
    for source, target, mode in FILES:
        parents(target)
        with open(os.path.join(HERE, source), "rb") as handle:
            archive.file(target, handle.read(), mode)
    return archive.finish()


def current(out=OUT):
    """The manifest of the artifacts in ``out``, or None when they are
    missing."""
    try:
        with open(os.path.join(out, MANIFEST)) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return None
    if all(os.path.exists(os.path.join(out, f)) for f in ("vmlinuz", "initramfs.gz")):
        return manifest
    return None


def build(out=OUT, force=False):
    """The artifacts in ``out``, made again only when their inputs
    changed; their manifest."""
    pkgs = packages()
    key = input_key(pkgs)
    manifest = current(out)
    if manifest and manifest.get("key") == key and not force:
        return manifest
    started = time.monotonic()
    log("building the guest from %s" % ", ".join("%s %s" % p for p in pkgs))
    work = tempfile.mkdtemp(prefix="o4n-guest-")
    try:
        os.chmod(work, 0o755)        # apt's sandbox user downloads into it
        _run(["apt-get", "download", "-q"] + ["%s=%s" % p for p in pkgs], cwd=work)
        debs = {name: os.path.join(work, f) for f in os.listdir(work) for name, _version in pkgs
                if f.startswith(name + "_") and f.endswith(".deb")}
        trees = {}
        for name, deb in debs.items():
            trees[name] = os.path.join(work, "x-" + name)
            _run(["dpkg-deb", "-x", deb, trees[name]])
        kernel_tree = trees[pkgs[0][0]]
        release, order = module_order(kernel_tree, MODULES)
        busybox_path = os.path.join(trees[BUSYBOX_PACKAGE], "bin", "busybox")
        applets = [a for a in _run([busybox_path, "--list-full"]).split() if a]
        with open(busybox_path, "rb") as handle:
            busybox = handle.read()
        modules = []
        for name, path in order:
            with open(path, "rb") as handle:
                modules.append((name, handle.read()))
        image = initramfs(busybox, applets, modules)
        staged = out + ".new"
        shutil.rmtree(staged, ignore_errors=True)
        os.makedirs(staged)
        shutil.copyfile(os.path.join(kernel_tree, "boot", "vmlinuz-" + release), os.path.join(staged, "vmlinuz"))
        with open(os.path.join(staged, "initramfs.gz"), "wb") as handle:
            handle.write(image)
        manifest = {"key": key, "packages": dict(pkgs), "kernel_release": release,
                    "modules": [name for name, _path in order],
                    "sizes": {f: os.path.getsize(os.path.join(staged, f)) for f in ("vmlinuz", "initramfs.gz")},
                    "build_seconds": round(time.monotonic() - started, 1)}
        with open(os.path.join(staged, MANIFEST), "w") as handle:
            json.dump(manifest, handle, indent=1, sort_keys=True)
        shutil.rmtree(out, ignore_errors=True)
        os.rename(staged, out)
        log("built in %.1f s: vmlinuz %d bytes, initramfs.gz %d bytes, modules %s" % (
            manifest["build_seconds"], manifest["sizes"]["vmlinuz"], manifest["sizes"]["initramfs.gz"],
            " ".join(manifest["modules"])))
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT, help="where the artifacts go (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="build even when the inputs did not change")
    args = parser.parse_args(argv)
    manifest = build(os.path.abspath(args.out), args.force)
    print(json.dumps(manifest, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
