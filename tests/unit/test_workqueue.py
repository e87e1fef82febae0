"""The work queue's client-go semantics, with real threads."""

import threading

from ansible_collections.ovn4nfv.k8s.plugins.module_utils.common.workqueue import WorkQueue


def test_a_key_is_queued_once_and_never_to_two_workers():
    queue = WorkQueue()
    try:
        for _i in range(3):
            queue.add("a")
        queue.add("b")
        assert len(queue) == 2
        assert queue.get() == "a"
        queue.add("a")                 # added while processing: not handed out again yet
        assert queue.get() == "b"
        assert queue.get(timeout=0.05) is None
        queue.done("a")                # now it comes back, once
        assert queue.get() == "a"
        queue.done("a")
        queue.done("b")
        assert queue.pending() == 0
    finally:
        queue.shutdown()


def test_backoff_doubles_per_key_is_capped_and_forgotten():
    queue = WorkQueue(base_delay=0.01, max_delay=0.08)
    try:
        assert [queue.when("k") for _i in range(6)] == [0.01, 0.02, 0.04, 0.08, 0.08, 0.08]
        assert queue.when("other") == 0.01
        queue.forget("k")
        assert queue.when("k") == 0.01
    finally:
        queue.shutdown()


def test_add_after_keeps_the_earliest_and_delivers_once():
    queue = WorkQueue()
    try:
        queue.add_after("k", 30)
        queue.add_after("k", 0.05)
        queue.add_after("k", 60)
        assert queue.get(timeout=10) == "k"
        queue.done("k")
        assert queue.get(timeout=0.2) is None
    finally:
        queue.shutdown()


def test_shutdown_wakes_every_worker():
    queue = WorkQueue()
    got = []
    workers = [threading.Thread(target=lambda: got.append(queue.get())) for _i in range(3)]
    for worker in workers:
        worker.start()
    queue.shutdown()
    for worker in workers:
        worker.join(10)
    assert got == [None, None, None]
    queue.add("late")
    assert len(queue) == 0
