# -*- coding: utf-8 -*-
# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What can be known of untrusted JSON text before it is parsed.

Python's parser recurses, and how deep it gets before RecursionError
depends on the Python (3.11 stops near 1,000 levels, 3.13 goes far deeper),
so each reader of untrusted JSON (pod annotations, CNI configurations)
holds the text to a nesting depth of its own first. Standard library only:
the CNI entry point imports it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def depth(text):
    """The deepest nesting of arrays and objects in JSON ``text``, counted
    without parsing it (strings and their escapes skipped)."""
    deepest = level = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest
