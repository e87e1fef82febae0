"""Code the tests, the benchmarks and the lab share: real daemons in a
sandbox (:mod:`~tests.harness.sandbox`), the Kubernetes API stand-in
(:mod:`~tests.harness.kube_api_standin`), the environments built from them
(``*_env``), the container runtime stand-in
(:mod:`~tests.harness.cni_runtime`), data-plane helpers, playbook runs and
the collection tree (:mod:`~tests.harness.collection`).

Everything imports it one way, with the checkout's root on ``sys.path``
(pytest: ``pythonpath = .`` in pytest.ini; a benchmark: ``python -m
benchmarks.<name>`` from the root): ``from tests.harness import sandbox``
or ``from tests.harness.sandbox import Sandbox``. Importing the package
makes ``ansible_collections.ovn4nfv.k8s`` importable
(:func:`tests.harness.collection.importable`), which most of its modules
need before they are imported.
"""

from tests.harness import collection

collection.importable()
