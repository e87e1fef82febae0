"""What the watcher has said (kube.Said): shared by the pods' workers and
the physnets' worker, each Event said once, said again once unsaid."""

import threading

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.kube import Said


def test_said_once_kept_and_unsaid():
    said = Said()
    assert said.fresh("ns/p", "A", ("u", "m"))
    said.mark("ns/p", "A", ("u", "m"))
    said.mark("ns/p", "B", ("u", "n"))
    assert not said.fresh("ns/p", "A", ("u", "m")) and said.fresh("ns/p", "A", ("u", "other"))
    said.unsay("ns/p", keep=("B",))
    assert said.fresh("ns/p", "A", ("u", "m")) and not said.fresh("ns/p", "B", ("u", "n"))
    said.unsay("ns/p", ["B"])
    assert said.fresh("ns/p", "B", ("u", "n")) and said.said == {}


def test_two_threads_mark_and_unsay_one_pod_without_a_torn_dict():
    """One thread keeps only some reasons (a pod served) while another
    marks and unsays its own (the physnets' worker): no iteration of a dict
    another thread changes, and the other's mark is never lost to a stale
    copy when it is the last word."""
    said, errors = Said(), []

    def served():
        for _round in range(20000):
            said.mark("ns/p", "Conflict", ("u", "x"))
            try:
                said.unsay("ns/p", keep=("Missing",))
            except RuntimeError as exc:
                errors.append(exc)

    def physnets():
        for _round in range(20000):
            said.mark("ns/p", "Missing", ("u", "m"))
            said.unsay("ns/p", ["Missing"])
        said.mark("ns/p", "Missing", ("u", "m"))
    threads = [threading.Thread(target=served), threading.Thread(target=physnets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert not said.fresh("ns/p", "Missing", ("u", "m")), "the physnets' last word stands"
