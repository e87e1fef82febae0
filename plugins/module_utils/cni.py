# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CNI side of the product: the request rules and the entry point.

The entry point (:func:`main`) is what the container runtime executes as
the ``ovn4nfv`` (and ``ovn4nfv-ipam``) plugin. It must start fast, so this
module uses the standard library only. It checks the request, forwards it
to the node agent over a unix socket (``server_socket``, by default
:data:`DEFAULT_SOCKET`) as one JSON line, and prints the agent's CNI result
or a CNI error: never a traceback.

:func:`parse_request` holds the rules once; the node agent applies the same
function to what it receives.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import array
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import socket
import sys

from .common.jsontext import depth
from .common.marks import CNI_TYPE, DEFAULT_SOCKET

SPEC_VERSION = "1.1.0"
SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
COMMANDS = ("ADD", "DEL", "CHECK", "VERSION", "STATUS", "GC")
DEFAULT_TIMEOUT = 120
MAX_STDIN = 1 << 20            # characters of network configuration read
MAX_CONFIG_DEPTH = 32          # nesting of arrays and objects in it

# CNI error codes (specification, "Error codes")
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
UNKNOWN_CONTAINER = 3
INVALID_ENVIRONMENT = 4
IO_FAILURE = 5
DECODE_FAILURE = 6
INVALID_CONFIG = 7
TRY_AGAIN = 11
PLUGIN_NOT_AVAILABLE = 50      # STATUS: the plugin cannot serve ADDs now

_CONTAINER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,511}\Z")
# Kernel rules: at most 15 bytes, not "." or "..", no '/', ':' or white space.
_IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}\Z")
# The CNI specification's rule for a network's name.
_NETWORK_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}\Z")
# What a runtime hands over in CNI_ARGS, by Kubernetes' own rules
# (apimachinery's validation): a namespace is a DNS-1123 label, a pod's
# name a DNS-1123 subdomain; a UID and a sandbox ID are opaque, but never
# more than these characters. Checked before any of them reaches an API
# path, an OVSDB row, a device name or a log line.
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"^(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_OPAQUE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")
K8S_ARGS = {
    "K8S_POD_NAMESPACE": (_DNS1123_LABEL, "a namespace: a DNS-1123 label (at most 63 of a-z, 0-9, '-')"),
    "K8S_POD_NAME": (_DNS1123_SUBDOMAIN, "a pod's name: a DNS-1123 subdomain (at most 253 of a-z, 0-9, '-', '.')"),
    "K8S_POD_UID": (_OPAQUE_ID, "a UID (at most 128 of letters, digits, '_', '.', ':', '-')"),
    "K8S_POD_INFRA_CONTAINER_ID": (_CONTAINER_ID, "a container ID (letters, digits, '_', '.', '-')"),
}
_NS_GET_NSTYPE = 0xB703        # ioctl: which kind of namespace a file is
_CLONE_NEWNET = 0x40000000


class CNIError(Exception):
    """A CNI error: a code from the specification, a message, details."""

    def __init__(self, code, msg, details=""):
        super(CNIError, self).__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details

    def to_json(self, version):
        return {"cniVersion": version, "code": self.code, "msg": self.msg, "details": self.details}


def parse_cni_args(text):
    """``CNI_ARGS`` (``K=V;K=V``) as a dict."""
    out = {}
    for part in (text or "").split(";"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise CNIError(INVALID_ENVIRONMENT, "CNI_ARGS: %r is not KEY=VALUE" % part)
        out[key] = value
    for key, (rule, what) in K8S_ARGS.items():
        if key in out and not rule.match(out[key]):
            raise CNIError(INVALID_ENVIRONMENT, "CNI_ARGS: %s=%s is not %s" % (key, _shown(out[key]), what))
    return out


def _shown(value):
    """``value`` as a log line may carry it: printable, and at most 80
    characters of it."""
    text = ascii(value)
    return text if len(text) <= 80 else text[:77] + "..."


def open_netns(path):
    """Open the namespace at ``path`` once, without blocking (a FIFO or a
    device fails at once instead of hanging), and check it on that
    descriptor (:func:`check_netns_fd`). Returns the descriptor: from then
    on only it is used, so a path swapped after the check changes nothing."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CNIError(UNKNOWN_CONTAINER, "CNI_NETNS: %s does not exist" % path)
    except OSError as exc:
        raise CNIError(INVALID_ENVIRONMENT, "CNI_NETNS: %s cannot be opened (%s)" % (path, exc.strerror))
    try:
        check_netns_fd(handle, path)
    except Exception:
        os.close(handle)
        raise
    return handle


def check_netns_fd(handle, path, forbidden=()):
    """Refuse a descriptor that is not a network namespace, or is this
    process's own network namespace or one of ``forbidden`` (paths of
    namespaces never to touch, such as the node's); compared by identity,
    since runtimes pass /var/run/netns/... and /proc/<pid>/ns/net alike."""
    try:
        kind = fcntl.ioctl(handle, _NS_GET_NSTYPE)
    except OSError:
        kind = None
    if kind != _CLONE_NEWNET:
        raise CNIError(INVALID_ENVIRONMENT, "CNI_NETNS: %s is not a network namespace" % path)
    theirs = os.fstat(handle)
    for other in ("/proc/self/ns/net",) + tuple(f for f in forbidden if f):
        mine = os.stat(other)
        if (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino):
            raise CNIError(INVALID_ENVIRONMENT,
                           "CNI_NETNS: %s is the node's own network namespace; refusing to touch it" % path)


def check_netns(path):
    """Refuse a namespace path that is missing, is not a network namespace,
    or is the node's own network namespace."""
    os.close(open_netns(path))


def _no_constant(name):
    raise ValueError("%s is not a number JSON allows" % name)


def load_config(stdin_text):
    """The network configuration on stdin: at most :data:`MAX_STDIN`
    characters of JSON nested at most :data:`MAX_CONFIG_DEPTH` levels, no
    NaN or Infinity."""
    if len(stdin_text) > MAX_STDIN:
        raise CNIError(DECODE_FAILURE, "the network configuration on stdin is %d characters; at most %d" % (
            len(stdin_text), MAX_STDIN))
    if depth(stdin_text) > MAX_CONFIG_DEPTH:
        raise CNIError(DECODE_FAILURE, "the network configuration on stdin is not JSON this plugin reads: "
                       "nested more than %d levels deep" % MAX_CONFIG_DEPTH)
    try:
        config = json.loads(stdin_text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise CNIError(DECODE_FAILURE, "the network configuration on stdin is not JSON: %s" % str(exc)[:200])
    if not isinstance(config, dict):
        raise CNIError(DECODE_FAILURE, "the network configuration on stdin is not a JSON object")
    return config


# the types of the configuration fields this product reads
_FIELD_TYPES = (("name", str), ("type", str), ("cniVersion", str), ("provider", str), ("mode", str),
                ("bridge", str), ("network", str), ("server_socket", str), ("mtu", int),
                ("vlan", int), ("trunk", list), ("ipam", dict), ("timeout", (int, float)))


def check_config(config):
    """Every configuration field this product reads has its type (a bool
    is no number here), and ``mtu`` a sane value. For another plugin's
    configuration (ovn4nfv-ipam serving macvlan, say) only ``ipam`` is
    this product's."""
    if not isinstance(config.get("ipam", {}), dict):
        raise CNIError(INVALID_CONFIG, "ipam: %r is not dict" % config["ipam"])
    fields = _FIELD_TYPES if config.get("type") == CNI_TYPE else _FIELD_TYPES[:3]
    for field, kind in fields:
        value = config.get(field)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise CNIError(INVALID_CONFIG, "%s: %r is not %s" % (
                field, value, getattr(kind, "__name__", "a number")))
    if config.get("type") == CNI_TYPE and config.get("mtu") is not None and not 576 <= config["mtu"] <= 65535:
        raise CNIError(INVALID_CONFIG, "mtu: %r is not from 576 to 65535" % config["mtu"])
    if config.get("type") == CNI_TYPE and config.get("mode") not in (None, "ovs"):
        raise CNIError(INVALID_CONFIG, "mode: %r is not ovs" % config["mode"])
    ipam = config.get("ipam") or {}
    for field in ("type", "provider", "server_socket"):
        if ipam.get(field) is not None and not isinstance(ipam[field], str):
            raise CNIError(INVALID_CONFIG, "ipam.%s: %r is not str" % (field, ipam[field]))


def _cidr(value):
    """Whether ``value`` is ``address/prefix`` of either family."""
    if not isinstance(value, str):
        return False
    address, sep, prefix = value.partition("/")
    if not sep or not prefix.isdigit():
        return False
    try:
        return int(prefix) <= ipaddress.ip_address(address).max_prefixlen
    except ValueError:
        return False


def _address(value):
    try:
        ipaddress.ip_address(value)
        return isinstance(value, str)
    except ValueError:
        return False


# The result's fields, by the specification: (field, its check, required).
_RESULT_ITEMS = {
    "interfaces": (("name", lambda v: isinstance(v, str) and v, True), ("mac", lambda v: isinstance(v, str), False),
                   ("sandbox", lambda v: isinstance(v, str), False),
                   ("mtu", lambda v: isinstance(v, int) and not isinstance(v, bool), False)),
    "ips": (("address", _cidr, True), ("gateway", _address, False),
            ("interface", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, False)),
    "routes": (("dst", _cidr, True), ("gw", _address, False)),
}


def check_prev_result(previous):
    """``prevResult`` checked against the specification's result schema
    before CHECK compares anything with it: a malformed one (interfaces
    as a number, an empty object) is an error, never a pass."""
    where = "prevResult"
    if not isinstance(previous, dict) or not previous:
        raise CNIError(INVALID_CONFIG, "%s: CHECK needs the result of the ADD (an object), not %s" % (
            where, _shown(previous)))
    if not isinstance(previous.get("cniVersion"), str):
        raise CNIError(INVALID_CONFIG, "%s.cniVersion: a result carries its version" % where)
    for field, rules in sorted(_RESULT_ITEMS.items()):
        items = previous.get(field, [])
        if not isinstance(items, list):
            raise CNIError(INVALID_CONFIG, "%s.%s: %s is not a list" % (where, field, _shown(items)))
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise CNIError(INVALID_CONFIG, "%s.%s[%d]: %s is not an object" % (where, field, index, _shown(item)))
            for key, good, required in rules:
                if (key in item and not good(item[key])) or (required and key not in item):
                    raise CNIError(INVALID_CONFIG, "%s.%s[%d].%s: %s" % (
                        where, field, index, key, "is required" if key not in item else
                        "%s is not valid" % _shown(item[key])))
    count = len(previous.get("interfaces", []))
    for index, item in enumerate(previous.get("ips", [])):
        if "interface" in item and item["interface"] >= count:
            raise CNIError(INVALID_CONFIG, "%s.ips[%d].interface: %d names no interface (there are %d)" % (
                where, index, item["interface"], count))
    if "dns" in previous and not isinstance(previous["dns"], dict):
        raise CNIError(INVALID_CONFIG, "%s.dns: %s is not an object" % (where, _shown(previous["dns"])))
    return previous


def parse_request(environ, stdin_text, open_path=True):
    """Check a CNI request; return ``{command, version, config, container_id,
    netns, ifname, args}``. Raises :class:`CNIError` with the right code.
    ``open_path`` false: the caller checks the namespace on a descriptor
    it was handed instead (the node agent)."""
    command = environ.get("CNI_COMMAND")
    if command not in COMMANDS:
        raise CNIError(INVALID_ENVIRONMENT, "CNI_COMMAND: %r is not one of %s" % (command, ", ".join(COMMANDS)))
    config = {}
    if command != "VERSION" or stdin_text.strip():
        config = load_config(stdin_text)
        check_config(config)
    version = config.get("cniVersion", SPEC_VERSION)
    if command != "VERSION" and version not in SUPPORTED_VERSIONS:
        raise CNIError(INCOMPATIBLE_VERSION, "cniVersion %r is not supported; supported: %s" % (
            version, ", ".join(SUPPORTED_VERSIONS)), "")
    if command == "CHECK" and version in ("0.3.0", "0.3.1"):
        raise CNIError(INCOMPATIBLE_VERSION, "CHECK needs cniVersion 0.4.0 or later, not %s" % version, "")
    request = {"command": command, "version": version, "config": config}
    if command in ("VERSION", "STATUS", "GC"):
        return request
    if command == "CHECK":
        check_prev_result(config.get("prevResult"))
    if not config.get("name") or not config.get("type"):
        raise CNIError(INVALID_CONFIG, "the network configuration needs a name and a type")
    if not isinstance(config["name"], str) or not _NETWORK_NAME.match(config["name"]):
        raise CNIError(INVALID_CONFIG, "name: %s is not a network name (at most 253 of letters, digits, '_', '.', "
                       "'-', the first a letter or digit)" % _shown(config["name"]))
    container = environ.get("CNI_CONTAINERID", "")
    if not _CONTAINER_ID.match(container):
        raise CNIError(INVALID_ENVIRONMENT, "CNI_CONTAINERID: %s is not a valid container ID" % _shown(container))
    ifname = environ.get("CNI_IFNAME", "")
    if not _IFNAME.match(ifname) or ifname in (".", ".."):
        raise CNIError(INVALID_ENVIRONMENT, "CNI_IFNAME: %s is not a valid interface name (1-15 of letters, "
                       "digits, '_', '.', '-')" % _shown(ifname))
    netns = environ.get("CNI_NETNS", "")
    if command in ("ADD", "CHECK"):
        if not netns:
            raise CNIError(INVALID_ENVIRONMENT, "CNI_NETNS: %s needs a network namespace" % command)
        if not os.path.isabs(netns):
            # relative to what? The plugin's and the agent's working
            # directories differ; the specification gives a path
            raise CNIError(INVALID_ENVIRONMENT, "CNI_NETNS: %r is not an absolute path" % netns)
        if open_path:
            check_netns(netns)
    # DEL never enters the namespace: whatever its path has become (gone, a
    # plain file, another namespace), the pod's ports and veths are removed
    request.update(container_id=container, ifname=ifname, netns=netns,
                   args=parse_cni_args(environ.get("CNI_ARGS")))
    return request


def host_ifname(pod_uid, interface):
    """The node-side veth name for one interface of one pod: deterministic,
    14 characters (the kernel allows 15), and distinct per pod and
    interface, so a retried ADD or a DEL finds the same device."""
    digest = hashlib.sha1(("%s/%s" % (pod_uid, interface)).encode("utf-8")).hexdigest()
    return "o4n" + digest[:11]


def select_entries(entries, ifname, per_attachment):
    """The ``ovnIfaceList`` entries one call sets up: all of them when the
    plugin is called once per pod, or the one named ``CNI_IFNAME`` when it
    is called once per attachment (as Multus calls it)."""
    if not per_attachment:
        return list(entries)
    chosen = [e for e in entries if e.get("interface") == ifname]
    if not chosen:
        raise CNIError(INVALID_CONFIG, "the pod's interface list has no interface %s (it has %s)" % (
            ifname, ", ".join(e.get("interface", "?") for e in entries) or "none"))
    return chosen


def entry_mtu(entry, default):
    """The MTU an interface list's entry gives its interface (its network's,
    written by the watcher), when it is one a network may have (576-9216,
    as virtual_network takes it); else ``default``."""
    mtu = entry.get("mtu")
    return mtu if isinstance(mtu, int) and not isinstance(mtu, bool) and 576 <= mtu <= 9216 else default


def devices(entries):
    """The entries the node makes a device for: not a trunk's VLANs
    (``parent``), which ride their trunk's interface tagged, each OVN's
    nested port; the pod's own datapath (or its VLAN device) carries them."""
    return [entry for entry in entries if not entry.get("parent")]


def result(version, entries, sandbox, host_interfaces=None, ifname=None):
    """The CNI result for ``entries`` (``ovnIfaceList`` form), in the result
    format of ``version``: IPs point at their interface by index; the
    default route is given where an entry carries the default gateway.

    ``ifname`` is the interface the runtime asked for (``CNI_IFNAME``) when
    the call sets up the whole pod. A pod's interfaces carry the names its
    request gives them (net0, net1), rarely the runtime's (eth0); a runtime
    takes the pod's IP from the addresses of ``CNI_IFNAME`` and refuses a
    sandbox without one (containerd: "failed to find network info for
    sandbox"). So when no entry is named ``ifname``, the first address
    is given without an interface index: the specification leaves
    the index optional, and runtimes (containerd's go-cni, CRI-O's ocicni)
    count an address without one as ``CNI_IFNAME``'s; the pod's IP is then
    its first interface's address. An interface configured by DHCP inside
    (``dhcp``) is listed without an address: the pod does not hold it;
    only when no interface has one, the first such interface's (the address
    its guest is given) goes to the runtime without an index, so that a pod
    whose interfaces are all configured inside (a VM's) still starts."""
    interfaces, ips, routes = [], [], []
    unnamed = ifname is not None and ifname not in [entry["interface"] for entry in entries]
    for entry in entries:
        index = len(interfaces)
        interfaces.append({"name": entry["interface"], "mac": entry["mac_address"], "sandbox": sandbox})
        if entry.get("dhcp"):
            continue        # its address is its guest's to take, by DHCP: not the pod's to report
        address = entry["ip_address"]
        ip = {"address": address, "gateway": entry.get("gateway_ip")}
        if not (unnamed and not ips):
            ip["interface"] = index
        if version.startswith("0."):
            ip["version"] = "6" if ":" in address else "4"
        ips.append(ip)
        for route in entry.get("routes") or []:
            routes.append({"dst": route["dst"], "gw": route.get("gw") or entry.get("gateway_ip")})
        if entry.get("default_gateway") and entry.get("gateway_ip"):
            routes.append({"dst": "::/0" if ":" in address else "0.0.0.0/0", "gw": entry["gateway_ip"]})
    guest = [entry for entry in entries if entry.get("dhcp")]
    if ifname is not None and not ips and guest:
        ips.append({"address": guest[0]["ip_address"], "gateway": guest[0].get("gateway_ip")})
        if version.startswith("0."):
            ips[0]["version"] = "6" if ":" in guest[0]["ip_address"] else "4"
    for name, mac in host_interfaces or []:
        interfaces.append({"name": name, "mac": mac})
    return {"cniVersion": version, "interfaces": interfaces, "ips": ips, "routes": routes, "dns": {}}


def call_agent(socket_path, message, timeout, fds=()):
    """Send one message to the node agent, with ``fds`` (descriptors) as
    ancillary data; return its answer (a dict)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(socket_path)
        except OSError as exc:
            raise CNIError(TRY_AGAIN, "the node agent is not reachable at %s (%s)" % (
                socket_path, exc.strerror or exc), "is the ovn4nfv node agent running?")
        try:
            data = json.dumps(message).encode() + b"\n"
            sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]) \
                if fds else 0
            if sent < len(data):
                # never an empty send: an agent that answered a quick refusal
                # and closed would turn it into EPIPE (sendall sends at least once)
                sock.sendall(data[sent:])
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            raise CNIError(TRY_AGAIN, "the node agent at %s did not answer within %ss" % (socket_path, timeout))
        except OSError as exc:
            raise CNIError(IO_FAILURE, "talking to the node agent at %s failed (%s)" % (
                socket_path, exc.strerror or exc))
    finally:
        sock.close()
    try:
        answer = json.loads(data.decode() or "null")
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise CNIError(IO_FAILURE, "the node agent at %s answered nothing readable" % socket_path)
    return answer


def run(environ, stdin_text, socket_path=DEFAULT_SOCKET):
    """One invocation: returns (exit code, JSON document to print).
    ``socket_path`` is the node agent's socket: the node's choice (the
    installed executable names it), never a network configuration's."""
    version = SPEC_VERSION
    try:
        request = parse_request(environ, stdin_text)
        version = request["version"]
        if request["command"] == "VERSION":
            return 0, {"cniVersion": version, "supportedVersions": list(SUPPORTED_VERSIONS)}
        config = request["config"]
        ipam = config.get("ipam") if isinstance(config.get("ipam"), dict) else {}
        for asked in (config.get("server_socket"), ipam.get("server_socket")):
            if asked is not None and asked != socket_path:
                # a NAD's author would make this root process talk to a
                # socket of their choosing
                raise CNIError(INVALID_CONFIG, "server_socket: %r is not this node's agent (%s); the node "
                               "chooses the socket, not the network configuration" % (asked, socket_path))
        timeout = config.get("timeout") or DEFAULT_TIMEOUT
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise CNIError(INVALID_CONFIG, "timeout must be a positive number")
        # The agent checks the same request again, with the same rules, and
        # the namespace on the descriptor opened and checked here, never
        # by its path again.
        message = {"env": dict((k, v) for k, v in environ.items() if k.startswith("CNI_")),
                   "stdin": stdin_text}
        fds = [open_netns(request["netns"])] if request["command"] in ("ADD", "CHECK") else []
        try:
            answer = call_agent(socket_path, message, timeout, fds)
        except CNIError as exc:
            if request["command"] == "STATUS":
                raise CNIError(PLUGIN_NOT_AVAILABLE, exc.msg, exc.details)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        if "error" in answer:
            error = answer["error"]
            raise CNIError(error.get("code", IO_FAILURE), error.get("msg", "the node agent failed"),
                           error.get("details", ""))
        return 0, answer.get("result")
    except CNIError as exc:
        return 1, exc.to_json(version)
    except Exception as exc:  # noqa: the runtime must get CNI's error JSON, never a traceback
        return 1, CNIError(IO_FAILURE, "unexpected failure: %s" % exc).to_json(version)


def main(socket_path=DEFAULT_SOCKET):
    """The plugin executable: environment and stdin in, JSON out. The
    executable the cni role installs passes the node agent's socket."""
    try:
        stdin_text = sys.stdin.read()
    except (OSError, ValueError):
        stdin_text = ""             # no stdin at all: parse_request says what is missing
    code, document = run(dict(os.environ), stdin_text, socket_path)
    if document is not None:
        sys.stdout.write(json.dumps(document) + "\n")
        sys.stdout.flush()
    return code
