"""The package repository of an in-place upgrade (issue 39): every Debian
package a node of the lab needs to go from one release to the next, in a
flat repository on the host that the nodes see at
``/srv/ovn4nfv-debs/<release>`` (lab/containers.py mounts the host's
``.cache/lab/debs`` there, read-only). The lab's podman networks are
internal, so a node reaches no mirror of its own.

It is made once, in a throwaway container of the older release's node image
on podman's default network (which does reach Debian's mirror): apt-utils
from the older release (for ``apt-ftparchive``), then the apt sources
switched to the newer release, ``apt-get --download-only dist-upgrade``
into the mounted output directory, and the index (``Packages`` and
``Release``) written there. The node image the lab's containers run is the
same image, so its dist-upgrade needs exactly these packages (and
apt-utils' newer version, which is never installed on a node, lies there
unused). It is made again only when the older image changed: the image's
id is kept beside the index (:data:`STAMP`).
"""

import os
import time

from lab.containers import DEBS, DEBS_MOUNT
from lab.host import DEBIAN_MIRROR, image_id, log, node_image, podman

BUILDER = "ovn4nfv-debs-build"
STAMP = ".built-from"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
INDEX = "Packages"


def sources(release, uri=DEBIAN_MIRROR):
    """The deb822 apt source of ``release`` from Debian's mirror."""
    return "Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n" % (uri, release, KEYRING)


def node_sources(release):
    """The deb822 apt source a node upgrades from: the flat repository of
    ``release`` as the nodes see it (trusted: apt-ftparchive signs nothing;
    the packages came from Debian's signed mirror)."""
    return "Types: deb\nURIs: file:%s/%s\nSuites: ./\nTrusted: yes\n" % (DEBS_MOUNT, release)


def script(release):
    """What the throwaway container runs (its /out is the output directory)."""
    return "\n".join([
        "set -eu",
        "export DEBIAN_FRONTEND=noninteractive",
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends apt-utils >/dev/null",
        "rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*",
        "cat > /etc/apt/sources.list.d/debian.sources <<'EOF'",
        sources(release).rstrip("\n"),
        "EOF",
        "apt-get update -qq",
        "apt-get -y -qq --download-only -o Dir::Cache::archives=/out dist-upgrade >/dev/null",
        "cd /out && rm -rf partial lock",
        "apt-ftparchive packages . > Packages.new && mv Packages.new Packages",
        "apt-ftparchive release . > Release.new && mv Release.new Release",
    ])


def read_index(text):
    """A ``Packages`` index as ``[{field: value}]`` (deb822 stanzas; a
    continuation line, one that starts with a space, belongs to the field
    before it)."""
    stanzas, current, field = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, field = {}, None
        elif line[0] in " \t" and field:
            current[field] += "\n" + line.strip()
        elif ":" in line:
            field, value = line.split(":", 1)
            current[field] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def check_index(directory):
    """What is wrong with the repository in ``directory`` (empty: nothing):
    every package its index names is there, with the size the index says."""
    path = os.path.join(directory, INDEX)
    if not os.path.exists(path):
        return ["no %s in %s" % (INDEX, directory)]
    with open(path) as handle:
        stanzas = read_index(handle.read())
    if not stanzas:
        return ["%s lists no package" % path]
    wrong = []
    for stanza in stanzas:
        name = stanza.get("Filename", "")
        deb = os.path.normpath(os.path.join(directory, name))
        if not name or not os.path.exists(deb):
            wrong.append("%s: %s is missing" % (stanza.get("Package"), name))
        elif str(os.path.getsize(deb)) != stanza.get("Size"):
            wrong.append("%s: %s has %d bytes, the index says %s" % (
                stanza.get("Package"), name, os.path.getsize(deb), stanza.get("Size")))
    return wrong


def built_from(directory):
    path = os.path.join(directory, STAMP)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return handle.read().strip() or None


def build(source="bookworm", release="trixie", root=DEBS):
    """The repository of ``release`` for nodes of ``source``'s image, in
    ``root``/``release``: made, or found current. Returns ``{"path",
    "packages", "bytes", "seconds", "cached"}``."""
    out = os.path.join(root, release)
    image = node_image(source)
    wanted = image_id(image)
    started = time.monotonic()
    cached = built_from(out) == wanted and not check_index(out)
    if not cached:
        log("the %s repository for %s's nodes: downloading (a throwaway container of %s)" % (release, source, image))
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(out):
            if name == STAMP or name.endswith(".deb") or name in (INDEX, "Release"):
                os.remove(os.path.join(out, name))
        podman("rm", "-f", "-t", "0", BUILDER, capture=True, check=False)
        try:
            podman("run", "--rm", "--name", BUILDER, "--network", "podman", "--volume", "%s:/out" % out,
                   "--entrypoint", "/bin/bash", image, "-c", script(release), capture=True, timeout=1800)
        finally:
            podman("rm", "-f", "-t", "0", BUILDER, capture=True, check=False)
        wrong = check_index(out)
        if wrong:
            raise SystemExit("lab: the %s repository in %s is broken: %s" % (release, out, "; ".join(wrong[:5])))
        with open(os.path.join(out, STAMP), "w") as handle:
            handle.write(wanted + "\n")
    with open(os.path.join(out, INDEX)) as handle:
        stanzas = read_index(handle.read())
    made = {"path": out, "packages": len(stanzas), "bytes": sum(int(s.get("Size", 0)) for s in stanzas),
            "seconds": round(time.monotonic() - started, 1), "cached": cached}
    log("the %s repository: %d packages, %.0f MB, %s in %.1fs" % (
        release, made["packages"], made["bytes"] / 1e6, "found current" if cached else "made", made["seconds"]))
    return made
