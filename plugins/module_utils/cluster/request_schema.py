# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one definition of every pod annotation the product reads, as JSON
Schema, and the checks that come before a schema can apply.

A pod's annotations are untrusted input. Each JSON annotation is held to
a size and a nesting depth before it is parsed (Python's parser recurses,
so a deeply nested value would otherwise end in RecursionError), then to
its schema here. Unknown keys are errors that name the key and the known
key it most resembles (``ipAdress``: did you mean ``ipAddress``?); names
match in full (``\\Z``, never ``$``, which lets a trailing newline by).
The schemas are for the ``jsonschema`` library, which matches patterns
with Python's ``re``. Every problem is reported as a field path:
``ovnNetwork[1].ip_address``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json

from ..common.errors import Ovn4nfvError, ValidationError
from ..common.jsontext import depth

try:
    import jsonschema
    HAS_JSONSCHEMA = True
except ImportError:  # pragma: no cover - the watcher needs it; modules do not
    HAS_JSONSCHEMA = False

MAX_TEXT = 16384        # characters in one annotation this product reads
MAX_DEPTH = 8           # nesting of arrays and objects in one annotation
MAX_INTERFACES = 10

INTERFACE = r"^[A-Za-z0-9]{0,14}[0-9]\Z"
_INTERFACE_RULE = "must be alphanumeric, end in a digit and be at most 15 characters"
_TEXT = {"type": "string", "maxLength": 253}
_FLAG = {"description": "true or false", "anyOf": [
    {"type": "boolean"}, {"type": "null"},
    {"enum": ["true", "True", "TRUE", "yes", "false", "False", "FALSE", "no", ""]}]}
_ADDRESS = {"description": "an address", "type": ["string", "null"], "maxLength": 64}
_ROUTE = {"type": "object", "additionalProperties": False, "required": ["dst"],
          "properties": {"dst": dict(_ADDRESS, type="string"), "gw": _ADDRESS}}
_NETWORK_NAME = {"type": "string", "minLength": 1, "maxLength": 253}

# how strictly a port's source addresses are held: its MAC and IPs (full),
# its MAC alone (mac), not at all (off)
SECURITY_LEVELS = ("full", "mac", "off")
MAX_VIRTUAL_IPS = 4     # VRRP virtual IPs one interface may answer for
MAX_VLANS = 8           # VLANs nested in one trunk interface (each counts as an interface)
# A VLAN of a trunk interface (OVN's nested port): its network and its VID
# in the pod, which the network's own (its wire's) need not be.
_VLAN_ENTRY = {
    "type": "object", "additionalProperties": False, "required": ["name", "vlan"],
    "properties": {
        "name": _NETWORK_NAME,
        "vlan": {"type": "integer", "minimum": 1, "maximum": 4094, "description": "a VLAN ID, 1-4094"},
        "ip_address": _ADDRESS, "ipAddress": _ADDRESS,
        "mac_address": _ADDRESS, "macAddress": _ADDRESS,
    },
}
MAX_RATE = 100000000    # kbit/s (100 Gbit/s): the most an interface's qos may ask for
MAX_BURST = 4294967295  # kbit: OVN's QoS bandwidth column
# What an interface sends, limited and marked (cluster/port_qos.py): a rate
# (kbit/s) or a DSCP mark or both, and a burst (kbit) beside a rate (which
# port_qos.asked holds it to).
_QOS = {
    "type": "object", "additionalProperties": False,
    "description": "an object with a rate or a dscp (or both)",
    "anyOf": [{"required": ["rate"]}, {"required": ["dscp"]}],
    "properties": {
        "rate": {"type": "integer", "minimum": 1, "maximum": MAX_RATE,
                 "description": "a rate in kbit/s, 1-%d" % MAX_RATE},
        "burst": {"type": "integer", "minimum": 1, "maximum": MAX_BURST,
                  "description": "a burst in kbit, 1-%d" % MAX_BURST},
        "dscp": {"type": "integer", "minimum": 0, "maximum": 63, "description": "a DSCP value, 0-63"},
    },
}
# One interface, in the seed's spelling and OVN4NFV's camelCase one.
INTERFACE_ENTRY = {
    "type": "object", "additionalProperties": False, "required": ["name", "interface"],
    "properties": {
        "name": _NETWORK_NAME,
        "interface": {"type": "string", "pattern": INTERFACE, "description": _INTERFACE_RULE},
        "qos": _QOS,
        "ip_address": _ADDRESS, "ipAddress": _ADDRESS,
        "mac_address": _ADDRESS, "macAddress": _ADDRESS,
        "default_gateway": _FLAG, "defaultGateway": _FLAG,
        "routes": {"type": "array", "maxItems": 32, "items": _ROUTE},
        # configured inside (a VM's guest, a DHCP client), by its network's DHCP
        "dhcp": _FLAG,
        # a trunk: these networks ride the interface tagged, each its own port
        "vlans": {"type": "array", "maxItems": MAX_VLANS, "items": _VLAN_ENTRY},
        # exceptions a network function asks for, granted only where its
        # network's operator allows them (cluster/port_grants.py)
        "port_security": {"enum": list(SECURITY_LEVELS)},
        "virtual_ips": {"type": "array", "maxItems": MAX_VIRTUAL_IPS, "items": dict(_ADDRESS, type="string")},
    },
}
SCHEMAS = {
    # the seed's annotation
    "ovnNetwork": {"type": "array", "maxItems": MAX_INTERFACES, "items": INTERFACE_ENTRY},
    # OVN4NFV's and Nodus's
    "k8s.plugin.opnfv.org/nfn-network": {
        "type": "object", "additionalProperties": False, "required": ["type", "interface"],
        "properties": {"type": {"enum": ["ovn4nfv"]},
                       "interface": {"type": "array", "maxItems": MAX_INTERFACES, "items": INTERFACE_ENTRY}}},
    # the legacy single interface on the default network
    "ovn": {"type": "object", "additionalProperties": False, "properties": {
        "ip_address": _ADDRESS, "ipAddress": _ADDRESS, "mac_address": _ADDRESS, "macAddress": _ADDRESS}},
    # OVN4NFV's routes, beside ovnNetwork: dev names the pod's interface
    "ovnNetworkRoutes": {"type": "array", "maxItems": 64, "items": {
        "type": "object", "additionalProperties": False, "required": ["dst", "dev"],
        "properties": {"dst": dict(_ADDRESS, type="string"), "gw": _ADDRESS,
                       "dev": {"type": "string", "pattern": INTERFACE, "description": _INTERFACE_RULE}}}},
    # Multus's selections, JSON form (the Network Plumbing WG's keys)
    "k8s.v1.cni.cncf.io/networks": {"type": "array", "maxItems": 32, "items": {
        "type": "object", "additionalProperties": False, "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z",
                     "description": "a NetworkAttachmentDefinition's name"},
            "namespace": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z",
                          "description": "a namespace's name"},
            "interface": {"type": "string", "pattern": r"^[^\s/:]{1,15}\Z",
                          "description": "an interface name of at most 15 characters"},
            "ips": {"type": "array", "maxItems": 8, "items": dict(_ADDRESS, type="string")},
            "mac": dict(_ADDRESS, type="string"),
            "default-route": {"type": "array", "maxItems": 4, "items": dict(_ADDRESS, type="string")},
            "cni-args": {"type": "object"}, "portMappings": {"type": "array"},
            "bandwidth": {"type": "object"}, "infiniband-guid": _TEXT,
        }}},
}
# ``<provider>.kubernetes.io/<key>``: plain strings, Kube-OVN's spelling
PROVIDER_KEYS = ("ip_address", "mac_address", "ip_pool", "cidr", "gateway", "allocated")


def load(key, text):
    """The JSON of annotation ``key``, within size and depth, checked
    against its schema. Raises ValidationError naming the field."""
    value = parse_json(key, text)
    check(key, value)
    return value


def parse_json(key, text):
    """Untrusted JSON ``text`` (named ``key`` in errors), parsed only
    within :data:`MAX_TEXT` characters and :data:`MAX_DEPTH` levels."""
    if not isinstance(text, str):
        raise ValidationError("%s: %r is not text" % (key, text))
    if len(text) > MAX_TEXT:
        raise ValidationError("%s: %d characters; at most %d are read" % (key, len(text), MAX_TEXT))
    if depth(text) > MAX_DEPTH:
        raise ValidationError("%s: nested more than %d levels deep" % (key, MAX_DEPTH))
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError("%s: not valid JSON (%s)" % (key, exc))
    return value


def check(key, value):
    """Hold ``value`` to the schema of annotation ``key``."""
    if not HAS_JSONSCHEMA:
        raise Ovn4nfvError("checking pod annotations needs the jsonschema library")
    validator = jsonschema.Draft7Validator(SCHEMAS[key])
    errors = sorted(validator.iter_errors(value), key=lambda e: (list(e.absolute_path), e.validator))
    if errors:
        raise ValidationError([describe(key, error) for error in errors[:5]])


def field_path(key, path):
    """``ovnNetwork[1].routes[0].dst`` from a schema error's path."""
    out = key
    for part in path:
        out += "[%d]" % part if isinstance(part, int) else ".%s" % part
    return out


_TYPES = {"object": "an object", "array": "a list", "string": "text", "boolean": "true or false",
          "null": "null", "integer": "a whole number", "number": "a number"}


def describe(key, error):
    """One schema error as a line naming the field and, for an unknown key,
    the known key it resembles."""
    where = field_path(key, error.absolute_path)
    kind, instance, schema = error.validator, error.instance, error.schema
    if kind == "additionalProperties":
        known = sorted(schema.get("properties", {}))
        extra = sorted(k for k in instance if k not in schema.get("properties", {}))
        return "; ".join(unknown_key(where, name, known) for name in extra)
    if kind == "required":
        missing = [k for k in error.validator_value if k not in instance]
        return "%s.%s: required, and missing" % (where, missing[0] if missing else "?")
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return "%s: %s is not %s" % (where, _short(instance), " or ".join(_TYPES.get(t, t) for t in wanted))
    if kind == "maxItems":
        return "%s: %d entries; at most %d" % (where, len(instance), error.validator_value)
    if kind in ("maxLength", "minLength"):
        return "%s: %s is too %s" % (where, _short(instance), "long" if kind == "maxLength" else "short")
    if kind == "enum":
        return "%s: %s is not one of %s" % (where, _short(instance), ", ".join(
            json.dumps(v) for v in error.validator_value))
    rule = schema.get("description")
    if rule:
        return "%s: %s is not %s" % (where, _short(instance), rule) if kind == "anyOf" else \
            "%s: %s %s" % (where, _short(instance), rule if rule.startswith("must") else "is not " + rule)
    return "%s: %s" % (where, error.message[:200])


def unknown_key(where, name, known):
    """The line for an unknown key, with the known key it resembles."""
    close = difflib.get_close_matches(str(name).lower(), [k.lower() for k in known], n=1, cutoff=0.6)
    hint = ""
    if close:
        hint = "; did you mean %r?" % next(k for k in known if k.lower() == close[0])
    return "%s: unknown key %s%s (known: %s)" % (where, _short(name), hint, ", ".join(known))


def _short(value):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
