"""The roles refuse inventory values that would render into a daemon's
options or a plugin's source as they are, by name, before anything on the
host changes (issue 32: an empty or option-bearing ``ovn_central_address``
rendered into ``OVN_CTL_OPTS``). The real ``ansible-playbook`` runs each
role on localhost; the refusal is the first task, so nothing is installed."""

import os
import subprocess
import sys

import pytest
import yaml

from tests.harness.playbook import ansible_env

GOOD = {"ovn_central": {"ovn_central_address": "192.168.33.10", "ovn_central_members": "ovn_central"},
        "ovn_controller": {"ovn_controller_central_addresses": ["192.168.33.10"]},
        "cni": {}, "container_runtime": {}}
PHYSNET = {"name": "physnet-prov", "bridge": "br-prov", "interface": "prov9"}
CASES = [
    ("ovn_central", {"ovn_central_address": ""}, "ovn_central_address: \"\" is not an IP address"),
    ("ovn_central", {"ovn_central_address": "10.0.0.1 --db-nb-addr=0.0.0.0"}, "ovn_central_address: \"10.0.0.1 --db"),
    ("ovn_central", {"ovn_central_address": "10.0.0.300"}, "ovn_central_address: \"10.0.0.300\""),
    ("ovn_central", {"ovn_central_nb_port": 70000}, "ovn_central_nb_port: \"70000\" is not a whole number"),
    ("ovn_central", {"ovn_central_ssl_dir": "/etc/ovn/pki --x"}, "ovn_central_ssl_dir: \"/etc/ovn/pki --x\""),
    ("ovn_controller", {"ovn_controller_central_addresses": ["10.0.0.1,ssl:6.6.6.6"]},
     "ovn_controller_central_addresses: \"10.0.0.1,ssl:6.6.6.6\""),
    ("ovn_controller", {"ovn_controller_ssl_dir": "relative"}, "ovn_controller_ssl_dir must be an absolute path"),
    # the node's addresses on VLANs of a physical network: refused by their forms, before the host is looked at
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, vlan_interfaces=[
        {"vlan": 4095, "address": "192.168.100.5/24"}])]}, "needs a vlan (1-4094)"),
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, vlan_interfaces=[
        {"vlan": 100, "address": "192.168.100.5/24"}, {"vlan": 100, "address": "192.168.100.6/24", "name": "v2"}])]},
     "a VLAN is asked for twice ([100, 100])"),
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, vlan_interfaces=[
        {"vlan": 100, "address": "192.168.100.0/24"}])]}, "an address as IP/prefix (a host's"),
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, vlan_interfaces=[
        {"vlan": 100, "address": "192.168.100.5"}])]}, "an address as IP/prefix (a host's"),
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, bridge="br-provider1", vlan_interfaces=[
        {"vlan": 4094, "address": "192.168.100.5/24"}])]}, 'here "br-provider1.4094"'),
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, vlan_interfaces=[
        {"vlan": 100, "address": "192.168.100.5/24", "name": "br-prov"}])]}, "a VLAN interface's name is another's"),
    # (the role's argument_specs refuse it first)
    ("ovn_controller", {"ovn_controller_physnets": [dict(PHYSNET, vlan_interfaces={"vlan": 100})]},
     "argument 'vlan_interfaces' is of type dict"),
    ("cni", {"cni_agent_socket": '/run/x.sock"); import os; os.system("id'}, "cni_agent_socket: "),
    ("cni", {"cni_bridge": "br-int; rm"}, "cni_bridge"),
    ("container_runtime", {"container_runtime_sandbox_image": 'x:1"\n[plugins.evil]'},
     "container_runtime_sandbox_image ("),
    ("container_runtime", {"container_runtime_sandbox_args": ["-P; rm -rf /"]}, "container_runtime_sandbox_args ("),
    ("container_runtime", {"container_runtime_cni_conf_dir": "/etc/cni/net.d\" x"},
     "container_runtime_cni_conf_dir: "),
    # a trailing newline passes a pattern that ends in $ (re.match): it would
    # end a TOML string, or start a second command
    ("container_runtime", {"container_runtime_sandbox_args": ["-P\n", "/usr/bin/rm", "-rf", "/var/lib/containerd"]},
     "container_runtime_sandbox_args ("),
    ("container_runtime", {"container_runtime_cni_bin_dir": "/opt/cni/bin\n"}, "container_runtime_cni_bin_dir: "),
    ("cni", {"cni_bin_dir": "/opt/cni/bin\n"}, "cni_bin_dir: "),
    ("container_runtime", {"container_runtime_snapshotter": "zfs"}, "value of container_runtime_snapshotter must be one of"),
]


def run_role(tmp_path, collections_path, role, extra, tasks_from="main", check=False):
    play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
             "vars": dict(GOOD[role], **extra),
             "tasks": [{"name": "the role", "ansible.builtin.include_role": {
                 "name": "ovn4nfv.k8s." + role, "tasks_from": tasks_from}}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    home = str(tmp_path / "home")
    os.makedirs(os.path.join(home, "tmp"), exist_ok=True)
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           str(path)] + (["--check"] if check else []), env=ansible_env(collections_path, home),
                          capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.parametrize("role, extra, words", CASES, ids=["%s-%d" % (c[0], i) for i, c in enumerate(CASES)])
def test_a_bad_input_is_refused_by_name_before_anything_changes(tmp_path, collections_path, role, extra, words):
    # --check: a check that lets the value through must not leave the
    # role's files on the machine the tests run on (the refusal is an
    # assert, which runs in check mode as in a real run)
    proc = run_role(tmp_path, collections_path, role, extra, check=True)
    assert proc.returncode != 0, proc.stdout
    assert words in proc.stdout, proc.stdout[-3000:]
    assert "changed=0" in proc.stdout and "ok=" in proc.stdout, proc.stdout[-2000:]
    for later in ("Install OVN central", "Install the OVN host package", "Install the agent's libraries",
                  "Install containerd, runc, the sandbox's binary and the reference CNI plugins"):
        assert "TASK [ovn4nfv.k8s.%s : %s]" % (role, later) not in proc.stdout, "a later task ran"


@pytest.mark.parametrize("role", sorted(GOOD))
def test_the_inventories_values_pass(tmp_path, collections_path, role):
    """The checks alone (``tasks_from: inputs``), with the lab's values and the defaults: all pass."""
    proc = run_role(tmp_path, collections_path, role, {}, tasks_from="inputs")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_vlan_interfaces_that_fit_pass(tmp_path, collections_path):
    """Good VLAN interfaces pass every check (``tasks_from: inputs``; the
    NIC is this host's ``lo``, the one every host has): each check's
    message is rendered even when it holds, so an attribute it names that
    an entry may leave out (``mtu``, ``name``) must not break it."""
    physnets = [dict(PHYSNET, interface="lo", vlan_interfaces=[
        {"vlan": 100, "address": "192.168.100.5/24"},
        {"vlan": 200, "address": "fd00:200::5/64", "name": "prov200", "mtu": 1500}])]
    proc = run_role(tmp_path, collections_path, "ovn_controller", {"ovn_controller_physnets": physnets},
                    tasks_from="inputs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Each VLAN interface's MTU fits its physical network's NIC" in proc.stdout
