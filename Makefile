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
MODULES := $(basename $(notdir $(wildcard plugins/modules/*.py)))

.PHONY: deps venv test unit functional integration sanity lint docs molecule bench lab lab-down clean

deps:
	.ci/install-deps

$(VENV)/.installed: requirements.txt | deps
	$(BASE_PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -c "import ovs._json" || { echo "python-ovs without its C JSON parser"; exit 1; }
	touch $@

venv: $(VENV)/.installed

# The whole default suite: what .ci/run runs.
test: venv
	$(PY) -m pytest tests/unit tests/functional tests/integration
	$(MAKE) --no-print-directory sanity lint docs molecule

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

# ansible-doc must render every module.
docs: venv
	rm -rf $(COLLECTION_TREE)/docs && mkdir -p $(COLLECTION_TREE)/docs/ansible_collections/ovn4nfv
	ln -s $(CURDIR) $(COLLECTION_TREE)/docs/ansible_collections/ovn4nfv/k8s
	@for m in $(MODULES); do \
	  ANSIBLE_COLLECTIONS_PATH=$(COLLECTION_TREE)/docs $(VENV)/bin/ansible-doc ovn4nfv.k8s.$$m > /dev/null \
	    || { echo "ansible-doc failed for $$m"; exit 1; }; \
	done; echo "ansible-doc renders: $(MODULES)"

bench: venv
	$(PY) benchmarks/ovsdb_bulk.py
	$(PY) benchmarks/topology.py
	$(PY) benchmarks/watcher.py
	$(PY) benchmarks/cni.py

# Molecule scenarios under extensions/molecule, against this working tree.
# A failed scenario ends with the tasks that failed: CI shows only the tail.
MOLECULE_SCENARIOS := ovs ovn_central ovn_controller node_gateway cni watcher central_cluster topology
molecule: venv
	rm -rf $(COLLECTION_TREE)/molecule && mkdir -p $(COLLECTION_TREE)/molecule/ansible_collections/ovn4nfv
	ln -s $(CURDIR) $(COLLECTION_TREE)/molecule/ansible_collections/ovn4nfv/k8s
	@for s in $(MOLECULE_SCENARIOS); do \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(COLLECTION_TREE)/molecule COLUMNS=160 \
	    $(VENV)/bin/molecule test -s $$s 2>&1 | tee $(COLLECTION_TREE)/molecule/$$s.log; \
	  test $${PIPESTATUS[0]} -eq 0 || { $(BASE_PYTHON) .ci/failure_summary.py $(COLLECTION_TREE)/molecule/$$s.log; exit 1; }; \
	done

# The local multi-node lab: podman containers as a master, two workers and
# an external host, stood up by playbooks/site.yml and networks.yml.
lab: venv
	$(PY) lab/lab.py run

lab-down:
	$(BASE_PYTHON) lab/lab.py down

clean:
	rm -rf $(VENV) .cache .pytest_cache tests/output
