# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes labels and label selectors: checked, and matched.

A selector is Kubernetes' ``LabelSelector`` (apimachinery's
``metav1.LabelSelector``): ``matchLabels`` and ``matchExpressions`` (``In``,
``NotIn``, ``Exists``, ``DoesNotExist``), all of which must hold. An empty
selector (``{}``) selects every object; which objects it is asked about
(one namespace's pods, every namespace) is the caller's business.

What is checked is what the API server's validation checks, so that a
selector refused here is one a real cluster would also have refused, and
each problem names its field (``spec.ingress[0].from[1].podSelector.
matchExpressions[0].values``). Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from .errors import ValidationError

# a label key: an optional DNS-1123 subdomain prefix and '/', then a name of
# at most 63 characters, alphanumeric at both ends, '-', '_' and '.' inside
_KEY = re.compile(r"^(?:([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
# a label value: empty, or as a key's name part
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_key(key, field):
    """``key`` if it is a valid label key, else a problem naming ``field``."""
    if not isinstance(key, str) or not _KEY.match(key) or len(key.split("/")[0]) > 253:
        raise ValidationError("%s: %r is not a label key" % (field, key))
    return key


def label_value(value, field):
    """``value`` if it is a valid label value, else a problem naming ``field``."""
    if not isinstance(value, str) or not _VALUE.match(value):
        raise ValidationError("%s: %r is not a label value" % (field, value))
    return value


def label_map(value, field, empty=False):
    """A mapping of labels (``matchLabels``, a chain's selector), sorted;
    refused when empty unless ``empty``."""
    if not isinstance(value, dict) or (not value and not empty):
        raise ValidationError("%s: %r is not a %smapping of labels" % (
            field, value, "" if empty else "non-empty "))
    problems = []
    for key, val in value.items():
        try:
            label_key(key, field)
            label_value(val, "%s.%s" % (field, key))
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)
    return dict(sorted(value.items()))


class Selector:
    """A checked label selector. ``labels``: ``{key: value}``;
    ``expressions``: ``(key, operator, values)`` tuples, values sorted."""

    def __init__(self, labels=None, expressions=()):
        self.labels = dict(sorted((labels or {}).items()))
        self.expressions = tuple(sorted(expressions))

    @property
    def empty(self):
        """Whether it selects every object."""
        return not self.labels and not self.expressions

    def matches(self, labels):
        """Whether an object with ``labels`` (a dict, or None) is selected."""
        labels = labels or {}
        for key, value in self.labels.items():
            if labels.get(key) != value:
                return False
        for key, operator, values in self.expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True

    def to_dict(self):
        """The selector in the API's form, canonical: equal selectors give
        equal dicts (keys and values sorted)."""
        out = {}
        if self.labels:
            out["matchLabels"] = dict(self.labels)
        if self.expressions:
            out["matchExpressions"] = [
                dict([("key", key), ("operator", operator)] + ([("values", list(values))] if values else []))
                for key, operator, values in self.expressions]
        return out

    def __eq__(self, other):
        return isinstance(other, Selector) and (self.labels, self.expressions) == (other.labels, other.expressions)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((tuple(self.labels.items()), self.expressions))

    def __repr__(self):
        return "Selector(%r)" % (self.to_dict(),)


def parse_selector(value, field):
    """A :class:`Selector` from the API's form (None and ``{}`` select
    everything), every problem named by its field."""
    if value is None:
        return Selector()
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a label selector (a mapping)" % (field, value))
    problems = []
    labels = {}
    if value.get("matchLabels") is not None:
        try:
            labels = label_map(value["matchLabels"], field + ".matchLabels", empty=True)
        except ValidationError as exc:
            problems.extend(exc.problems)
    expressions = []
    raw = value.get("matchExpressions")
    if raw is not None and not isinstance(raw, list):
        problems.append("%s.matchExpressions: %r is not a list" % (field, raw))
        raw = []
    for index, expression in enumerate(raw or []):
        where = "%s.matchExpressions[%d]" % (field, index)
        try:
            expressions.append(_expression(expression, where))
        except ValidationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ValidationError(problems)
    return Selector(labels, expressions)


def _expression(value, where):
    if not isinstance(value, dict):
        raise ValidationError("%s: %r is not a requirement (key, operator, values)" % (where, value))
    key = label_key(value.get("key"), where + ".key")
    operator = value.get("operator")
    if operator not in OPERATORS:
        raise ValidationError("%s.operator: %r is not one of %s" % (where, operator, ", ".join(OPERATORS)))
    values = value.get("values")
    if values is None:
        values = []
    if not isinstance(values, list):
        raise ValidationError("%s.values: %r is not a list" % (where, values))
    if operator in ("In", "NotIn") and not values:
        raise ValidationError("%s.values: %s needs at least one value" % (where, operator))
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValidationError("%s.values: %s takes no values, not %r" % (where, operator, values))
    for index, item in enumerate(values):
        label_value(item, "%s.values[%d]" % (where, index))
    return (key, operator, tuple(sorted(set(values))))
