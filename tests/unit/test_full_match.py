"""Names are matched in full: a trailing newline, which a regex's ``$``
lets by, is refused everywhere the core checks a name."""

import json

import pytest

from ansible_collections.ovn4nfv.k8s.plugins.module_utils import cni
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.cluster import networks as vn
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common import naming
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.errors import ValidationError

CONFIG = json.dumps({"cniVersion": "1.0.0", "name": "ovn", "type": "ovn4nfv"})


def environ(**changes):
    out = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "ctr1", "CNI_IFNAME": "eth0", "CNI_NETNS": "",
           "CNI_PATH": "/opt/cni/bin"}
    out.update(changes)
    return out


def test_cni_names_with_a_trailing_newline_are_refused():
    assert cni.parse_request(environ(), CONFIG)["ifname"] == "eth0"
    for key, value in (("CNI_IFNAME", "eth0\n"), ("CNI_CONTAINERID", "ctr1\n")):
        with pytest.raises(cni.CNIError) as err:
            cni.parse_request(environ(**{key: value}), CONFIG)
        assert err.value.code == cni.INVALID_ENVIRONMENT and key in err.value.msg


@pytest.mark.parametrize("check,value", [
    (lambda v: naming.ovn_name(v, "name"), "net1\n"),
    (lambda v: naming.interface_name(v, "bridge"), "br-ex\n"),
    (lambda v: vn.check_network({"name": "n", "provider": v}, "config[0]"), "macvlan.default\n"),
])
def test_core_names_with_a_trailing_newline_are_refused(check, value):
    check(value.rstrip("\n"))
    with pytest.raises(ValidationError):
        check(value)
