# Copyright: contributors to ovn4nfv.k8s
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# Sphinx settings for the collection's documentation site (make docs). The
# module and role reference is generated from the code by antsibull-docs;
# the guides are docs/docsite/rst, listed in docs/docsite/extra-docs.yml.

project = "ovn4nfv.k8s"
copyright = "ovn4nfv.k8s contributors"
title = "ovn4nfv.k8s: multi-interface Kubernetes networking on OVN/OVS"
html_short_title = "ovn4nfv.k8s"
extensions = ["sphinx_antsibull_ext"]
pygments_style = "ansible"
highlight_language = "YAML+Jinja"
html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False
# No intersphinx: the build runs offline, and links into Ansible's own
# documentation are left as text.
default_role = "any"
