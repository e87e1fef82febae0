"""A network switch's mark as the watcher's NB listener saw it
(``daemons/switch_marks.py``): the first sight of a switch is a change (its
mark before the watcher started is not known), and so is a new network;
then only another mark is."""

from types import SimpleNamespace

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.marks import K_POLICY_MODE, NETWORK_KEY
from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.switch_marks import SwitchMarks


def switch(name, mode=None, network=True):
    ids = {NETWORK_KEY: name} if network else {}
    if mode is not None:
        ids[K_POLICY_MODE] = mode
    return SimpleNamespace(name=name, external_ids=ids)


def test_the_first_sight_of_a_switch_is_a_change_then_only_another_mark_is():
    marks = SwitchMarks(K_POLICY_MODE)
    assert marks.changed("update", switch("net1")), "unseen: what it was is not known"
    assert not marks.changed("update", switch("net1")), "the same mark"
    assert marks.changed("update", switch("net1", "stateless"))
    assert not marks.changed("update", switch("net1", "stateless"))
    assert marks.changed("update", switch("net1")), "back to none"
    assert not marks.changed("delete", switch("net1")), "gone, as it was last seen"


def test_a_new_network_is_a_change_and_a_switch_of_no_network_never():
    marks = SwitchMarks(K_POLICY_MODE)
    assert marks.changed("create", switch("net2"))
    assert not marks.changed("update", switch("net2"))
    assert marks.changed("create", switch("net2")), "made again"
    assert not marks.changed("create", switch("join", network=False))
    assert not marks.changed("update", switch("join", "stateless", network=False))
