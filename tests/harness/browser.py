"""A real browser for the tests: headless Chromium on local files, and
what its screenshots show.

``python3 -m tests.harness.browser picture SVG`` takes a screenshot of a picture
network_picture wrote and checks that each object's shape is shown filled
in its colour where the SVG places it; it prints
``shown <id>`` for each object shown (its graph node id, as the SVG's
XML reads), ``not shown: <id>`` for each one not, and last
``shown: objects=<n> shown=<k>``; it exits 1
unless every one is (the topology scenario runs it on the lab's picture).
"""

import os
import re
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

CHROMIUM = "/usr/bin/chromium"
SVG = "{http://www.w3.org/2000/svg}"


def chromium(*args, profile):
    """Headless Chromium on a local file, with nothing that reaches out."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--user-data-dir=%s" % profile] + list(args)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _png(path):
    """``(width, height, colour type, raw scanlines)`` of a PNG."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    chunks, offset = [], 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        if kind == b"IDAT":
            chunks.append(data[offset + 8:offset + 8 + length])
        offset += 12 + length
    return width, height, (depth, colour), zlib.decompress(b"".join(chunks))


def png_pixels(path):
    """(width, height, number of distinct row checksums) of a PNG: a blank
    page has one kind of row."""
    width, height, _kind, raw = _png(path)
    stride = len(raw) // height
    rows = set(zlib.crc32(raw[i * stride + 1:(i + 1) * stride]) for i in range(height))
    return width, height, len(rows)


def _unfilter(kind, line, prior, channels):
    for i in range(len(line)):
        left = line[i - channels] if i >= channels else 0
        up, corner = prior[i], prior[i - channels] if i >= channels else 0
        if kind == 1:
            line[i] = (line[i] + left) & 255
        elif kind == 2:
            line[i] = (line[i] + up) & 255
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 255
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
    return line


def png_rgb(path):
    """``(width, height, pixel(x, y) -> (r, g, b))`` of an 8-bit RGB or RGBA
    PNG, its scanline filters undone."""
    width, height, (depth, colour), raw = _png(path)
    assert depth == 8 and colour in (2, 6), (depth, colour)
    channels = 3 if colour == 2 else 4
    stride, rows, prior = width * channels, [], bytearray(width * channels)
    for y in range(height):
        start = y * (stride + 1)
        prior = _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), prior, channels)
        rows.append(prior)
    return width, height, lambda x, y: tuple(rows[y][x * channels:x * channels + 3])


def svg_shapes(svg):
    """``{object id: ((x, y), fill)}``: for each node of a Graphviz SVG, a
    point inside its shape near its right edge (clear of its centred
    label), in the SVG's pixels, and the colour it is filled with."""
    graph = ET.fromstring(svg).find(SVG + "g")
    tx, ty = [float(v) for v in re.search(r"translate\(([-\d.]+) ([-\d.]+)\)", graph.get("transform")).groups()]
    out = {}
    for group in graph.iter(SVG + "g"):
        if group.get("class") != "node":
            continue
        shape = next(e for e in group.iter() if e.tag in (SVG + "polygon", SVG + "path", SVG + "ellipse"))
        if shape.tag == SVG + "ellipse":
            cx, cy, rx = (float(shape.get(k)) for k in ("cx", "cy", "rx"))
            xs, ys = [cx - rx, cx + rx], [cy]
        else:
            numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", shape.get("points") or shape.get("d"))]
            xs, ys = numbers[0::2], numbers[1::2]
        x, y = max(xs) - 6, (min(ys) + max(ys)) / 2
        out[group.get("id")] = ((int(round((x + tx) * 4 / 3)), int(round((y + ty) * 4 / 3))), shape.get("fill"))
    return out


def colour(hex_text):
    return tuple(int(hex_text[i:i + 2], 16) for i in (1, 3, 5))


def screenshot(svg_path, workdir):
    """A screenshot of the SVG at ``svg_path``, big enough for all of it;
    ``(shapes, pixel)``."""
    with open(svg_path) as handle:
        shapes = svg_shapes(handle.read())
    width = max(x for (x, _y), _f in shapes.values()) + 200
    height = max(y for (_x, y), _f in shapes.values()) + 200
    shot = os.path.join(workdir, "picture.png")
    chromium("--window-size=%d,%d" % (width, height), "--screenshot=%s" % shot, "file://" + os.path.abspath(svg_path),
             profile=os.path.join(workdir, "profile"))
    return shapes, png_rgb(shot)[2]


def shown(svg_path, workdir):
    """The objects the screenshot shows filled in their colour, and those
    it does not: ``(shown, missing)``."""
    shapes, pixel = screenshot(svg_path, workdir)
    seen, missing = [], []
    for ident, ((x, y), fill) in sorted(shapes.items()):
        good = all(abs(a - b) <= 3 for a, b in zip(pixel(x, y), colour(fill)))
        (seen if good else missing).append(ident)
    return seen, missing


def main(argv):
    if len(argv) != 3 or argv[1] != "picture":
        raise SystemExit(__doc__)
    workdir = tempfile.mkdtemp(prefix="ovn4nfv-browser-")
    try:
        seen, missing = shown(argv[2], workdir)
    finally:
        subprocess.run(["rm", "-rf", workdir], check=False)
    print("\n".join(["shown " + ident for ident in seen] + ["not shown: " + ident for ident in missing]
                    + ["shown: objects=%d shown=%d" % (len(seen) + len(missing), len(seen))]))
    return 0 if seen and not missing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
