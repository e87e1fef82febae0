"""The documentation site: ``make docs`` builds it from the code and the
guides, and a real browser (headless Chromium) renders the module index and
a guide."""

import os
import subprocess

import pytest

from tests.harness.browser import chromium, png_pixels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = sorted(p[:-3] for p in os.listdir(os.path.join(ROOT, "plugins", "modules")) if p.endswith(".py"))
ROLES = sorted(os.listdir(os.path.join(ROOT, "roles")))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    build = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "docs-site", "DOCS_BUILD=%s" % build],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return os.path.join(str(build), "html")


def test_the_module_index_lists_every_module_and_role(site, tmp_path):
    index = os.path.join(site, "collections", "ovn4nfv", "k8s", "index.html")
    dom = chromium("--dump-dom", "file://" + index, profile=tmp_path / "profile")
    for module in MODULES:
        assert "%s_module.html" % module in dom, module
    for role in ROLES:
        assert "%s_role.html" % role in dom, role
    # the guides are linked from the collection's page
    assert "docsite/lab.html" in dom and "docsite/troubleshooting.html" in dom
    shot = tmp_path / "index.png"
    chromium("--window-size=1280,900", "--screenshot=%s" % shot, "file://" + index, profile=tmp_path / "profile")
    width, height, distinct_rows = png_pixels(str(shot))
    assert (width, height) == (1280, 900)
    assert distinct_rows > 50, "the page rendered almost blank"


def test_a_guide_and_a_module_page_render(site, tmp_path):
    guide = os.path.join(site, "collections", "ovn4nfv", "k8s", "docsite", "tls_rbac.html")
    dom = chromium("--dump-dom", "file://" + guide, profile=tmp_path / "profile")
    assert "<h1>TLS, RBAC and secrets" in dom
    assert "No private key passes through the controller" in dom
    module = os.path.join(site, "collections", "ovn4nfv", "k8s", "virtual_network_module.html")
    dom = chromium("--dump-dom", "file://" + module, profile=tmp_path / "profile")
    # generated from the module's DOCUMENTATION, EXAMPLES and RETURN
    for text in ("underlay_mtu", "Examples", "Return Values", "backends"):
        assert text in dom, text
