# ovn4nfv.k8s: the two commands that matter are `make lab` (issue 6) and
# `make test`. Both install what a fresh machine lacks.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# The Python of Debian's python3-openvswitch: its python-ovs carries the C
# JSON parser that PyPI's build lacks, and it is what the nodes run.
BASE_PYTHON := /usr/bin/python3
# Outside the checkout: inside it, ansible-test would ask this repository's
# git which files exist, and find none under an ignored directory.
COLLECTION_TREE := $(or $(TMPDIR),/tmp)/ovn4nfv.k8s-collections
# The Debian release of the lab's nodes: trixie (13, the default: what an
# operator deploys today), bookworm (12), or mixed (a cluster half-way
# through the upgrade from 12 to 13, in the order OVN's upgrade guide gives).
DEBIAN ?= trixie
# The lab's inventory: its machines, networks and addresses (lab/layout.py
# reads it). Empty: the one the running lab was made from, else
# playbooks/inventory/example.yml; e.g. playbooks/inventory/three-workers.yml.
INVENTORY ?=
# The lab is a package run from the checkout's root (python -m lab).
LAB_PY = $(PY) -m lab --debian $(DEBIAN) $(if $(INVENTORY),--inventory $(INVENTORY))
MODULES := $(basename $(notdir $(wildcard plugins/modules/*.py)))

.PHONY: deps venv test test-debian test-debian12 test-debian13 unit functional integration sanity lint docs docs-site molecule bench lab lab-reboot lab-chaos lab-failover lab-upgrade lab-down clean

deps:
	.ci/install-deps

$(VENV)/.installed: requirements.txt requirements-test.txt | deps
	$(BASE_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --upgrade -r requirements-test.txt
	$(PY) -c "import ovs._json" || { echo "python-ovs without its C JSON parser"; exit 1; }
	touch $@

venv: $(VENV)/.installed

# The longest test files, named first so that a worker starts each early
# and neither core idles at the end (pytest collects a file named twice once).
PYTEST_LONGEST := tests/integration/test_modules.py tests/integration/test_bad_input.py \
  tests/integration/test_examples.py tests/functional/test_policy_dataplane.py tests/functional/test_cni_agent.py \
  tests/functional/test_rbac.py tests/integration/test_uplink.py tests/functional/test_watcher.py

# The whole default suite: what .ci/run runs.
# pytest runs on both cores (a test file stays on one worker, so its
# module-scoped daemons start once); the docs site is built and opened in
# Chromium by tests/integration/test_docs.py, the installed package is tried
# by tests/integration/test_package.py.
test: venv
	@echo "== $$(date +%T) pytest in the venv"
	$(PY) -m pytest -n 2 --dist loadfile $(PYTEST_LONGEST) tests/unit tests/functional tests/integration
	@echo "== $$(date +%T) the core on Debian 12's and 13's libraries"
	$(MAKE) --no-print-directory test-debian
	@echo "== $$(date +%T) sanity"
	$(MAKE) --no-print-directory sanity
	@echo "== $$(date +%T) lint"
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory molecule
	@echo "== $$(date +%T) done"

# The core on the library versions the nodes run, with Debian's pytest,
# outside the venv: Debian 12's python3 packages (the floors in
# requirements.txt) on this machine, Debian 13's (Python 3.13, OVS 3.5, OVN
# 25.03) in a container of the lab's Debian 13 node image (.ci/core_tests.py,
# a CI job that builds on the lab's images).
# test_failure_summary checks CI tooling that needs ansible-playbook, and
# test_payload Ansible's own module packaging (ansible-core): both run in the
# venv's suite, the one place ansible-core is installed. test_cri_runtime
# drives a real containerd through the tests' CRI client (grpcio): what it
# tests is the runtime in front of the plugin, so it runs once, there too;
# test_lab_kubelet tests the lab's kubelet, which imports that client.
# test_upgrade_playbook renders upgrade.yml's template with Jinja2, which
# ansible-core brings: venv only.
# The data-plane tests (test_dataplane, test_policy_dataplane,
# test_policy_watcher_dataplane, test_dhcp_dataplane, test_vm_guest) judge what OVN, OVS and QEMU do: on
# this machine the venv's run has the same binaries, so Debian 12's skips
# them; Debian 13's, with its own OVN 25.03 and OVS 3.5, runs them.
test-debian: test-debian12 test-debian13

test-debian12: deps
	$(BASE_PYTHON) -m pytest -p no:cacheprovider -n 2 --dist loadfile tests/unit tests/functional \
	  --ignore tests/functional/test_failure_summary.py --ignore tests/unit/test_payload.py \
	  --ignore tests/unit/test_upgrade_playbook.py \
	  --ignore tests/functional/test_cri_runtime.py --ignore tests/functional/test_lab_kubelet.py \
	  --ignore tests/functional/test_dataplane.py --ignore tests/functional/test_policy_dataplane.py \
	  --ignore tests/functional/test_policy_watcher_dataplane.py --ignore tests/functional/test_dhcp_dataplane.py \
	  --ignore tests/functional/test_vm_guest.py

test-debian13: deps
	PYTHONPATH=$(CURDIR) $(BASE_PYTHON) .ci/core_tests.py --debian trixie

unit: venv
	$(PY) -m pytest tests/unit

functional: venv
	$(PY) -m pytest tests/functional

integration: venv
	$(PY) -m pytest tests/integration

# ansible-test needs the collection at ansible_collections/<ns>/<name>.
sanity: venv
	rm -rf $(COLLECTION_TREE) && mkdir -p $(COLLECTION_TREE)/ansible_collections/ovn4nfv/k8s
	git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C $(COLLECTION_TREE)/ansible_collections/ovn4nfv/k8s
	.ci/seed-ansible-test $(PY)
	cd $(COLLECTION_TREE)/ansible_collections/ovn4nfv/k8s && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(CURDIR)/$(VENV)/bin/ansible-test sanity --local --python 3.11 \
	  2>&1 | tee $(COLLECTION_TREE)/sanity.log; test $${PIPESTATUS[0]} -eq 0
	@! grep -q "All targets skipped" $(COLLECTION_TREE)/sanity.log || { echo "ansible-test found no files"; exit 1; }

# The roles and playbooks call the collection's own modules and roles by
# FQCN: ansible-lint finds them through a tree whose ovn4nfv/k8s is this one.
lint: venv
	rm -rf $(COLLECTION_TREE)/lint && mkdir -p $(COLLECTION_TREE)/lint/ansible_collections/ovn4nfv
	ln -s $(CURDIR) $(COLLECTION_TREE)/lint/ansible_collections/ovn4nfv/k8s
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(COLLECTION_TREE)/lint $(VENV)/bin/ansible-lint
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(COLLECTION_TREE)/lint $(VENV)/bin/antsibull-changelog lint

# The documentation site: the module and role reference generated from the
# code by antsibull-docs, the guides in docs/docsite, built by Sphinx into
# $(DOCS_BUILD)/html. tests/integration/test_docs.py builds it and opens it
# in headless Chromium.
DOCS_BUILD := docs/_build
docs: venv
	$(MAKE) --no-print-directory docs-site

# The build alone, for a caller that has the venv already (the docs test: a
# venv update under running tests would pull libraries from under them).
docs-site:
	rm -rf $(COLLECTION_TREE)/docs $(DOCS_BUILD) && mkdir -p $(COLLECTION_TREE)/docs/ansible_collections/ovn4nfv $(DOCS_BUILD)/rst
	ln -s $(CURDIR) $(COLLECTION_TREE)/docs/ansible_collections/ovn4nfv/k8s
	chmod og-w $(DOCS_BUILD)/rst
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(COLLECTION_TREE)/docs \
	  $(VENV)/bin/antsibull-docs --config-file docs/antsibull-docs.cfg collection --use-current \
	  --fail-on-error --dest-dir $(DOCS_BUILD)/rst ovn4nfv.k8s
	cp docs/index.rst $(DOCS_BUILD)/rst/index.rst
	$(VENV)/bin/sphinx-build -q -b html -c docs $(DOCS_BUILD)/rst $(DOCS_BUILD)/html
	@echo "docs: $(DOCS_BUILD)/html/index.html"

# Each benchmark runs as a module from the checkout's root, so that it
# imports the harness as tests.harness (README and testing.rst list them
# all: tests/unit/test_harness_layout.py checks).
bench: venv
	$(PY) -m benchmarks.ovsdb_bulk
	$(PY) -m benchmarks.topology
	$(PY) -m benchmarks.watcher
	$(PY) -m benchmarks.cni
	$(PY) -m benchmarks.churn
	$(PY) -m benchmarks.services
	$(PY) -m benchmarks.audit
	$(PY) -m benchmarks.scale
	$(PY) -m benchmarks.policy
	$(PY) -m benchmarks.resync
	$(PY) -m benchmarks.raft
	$(PY) -m benchmarks.migration
	$(PY) -m benchmarks.hotplug

# Molecule scenarios under extensions/molecule, against this working tree,
# each as scenario:release. The roles' scenarios and the RAFT central run on
# Debian 13; the lab's topology is stood up on Debian 12 and upgraded in
# place to 13 by playbooks/upgrade.yml while traffic runs (lab upgrade), so
# that every role runs on 12 and every later check on the upgraded cluster.
# (topology:mixed, Debian 12 beside 13, still runs: make molecule
# MOLECULE_SCENARIOS=topology:mixed.)
# A failed scenario ends with the tasks that failed: CI shows only the tail.
# The nodes are reached through lab/connection_plugins/podman_nsenter.py.
MOLECULE_SCENARIOS := node:trixie ovn_central:trixie cni:trixie \
  watcher:trixie central_cluster:trixie topology:bookworm
molecule: venv
	$(PY) -m lab deps
	rm -rf $(COLLECTION_TREE)/molecule && mkdir -p $(COLLECTION_TREE)/molecule/ansible_collections/ovn4nfv
	ln -s $(CURDIR) $(COLLECTION_TREE)/molecule/ansible_collections/ovn4nfv/k8s
	@for item in $(MOLECULE_SCENARIOS); do s=$${item%%:*}; \
	  echo "== $$(date +%T) molecule $$s on Debian $${item#*:}"; \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(COLLECTION_TREE)/molecule COLUMNS=160 \
	    ANSIBLE_CONNECTION_PLUGINS=$(CURDIR)/lab/connection_plugins \
	    OVN4NFV_DEBIAN=$${item#*:} $(VENV)/bin/molecule test -s $$s 2>&1 | tee $(COLLECTION_TREE)/molecule/$$s.log; \
	  test $${PIPESTATUS[0]} -eq 0 || { $(BASE_PYTHON) .ci/failure_summary.py $(COLLECTION_TREE)/molecule/$$s.log; exit 1; }; \
	done

# The local multi-node lab: podman containers as the inventory's machines
# (the example's: a master, two workers and an external host), stood up by
# playbooks/site.yml and networks.yml.
lab: venv
	$(LAB_PY) run

# Restart one lab node's container (NODE=master, worker1, ...): no Ansible
# runs; its pods are made again as kubelet would, verify.yml must pass.
lab-reboot: venv
	$(LAB_PY) reboot $(NODE)

# Break the running lab on purpose, one fault of each kind, then audit,
# repair, audit again and verify (lab.py chaos says which and why).
lab-chaos: venv
	$(LAB_PY) chaos

# A lab with several masters (INVENTORY=playbooks/inventory/ha.yml): the
# leading watcher SIGKILLed, then SIGSTOPped, then its master cut off,
# while pods are made; each fault timed to the first pod served after it
# (lab/failover.py).
lab-failover: venv
	$(LAB_PY) failover

# The lab's nodes upgraded in place from Debian 12 to 13 by
# playbooks/upgrade.yml while steady traffic runs, the losses counted per
# node, step and flow (lab/upgrade.py). A bookworm lab is stood up first
# when none stands: this target's nodes start on bookworm, whatever DEBIAN
# says elsewhere.
lab-upgrade: DEBIAN = bookworm
lab-upgrade: venv
	$(LAB_PY) upgrade

lab-down:
	$(BASE_PYTHON) -m lab down

clean:
	rm -rf $(VENV) .cache .pytest_cache tests/output
