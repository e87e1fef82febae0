"""The watcher under a burst, then under a steady arrival.

Burst: once the watcher is up and has listed (an empty cluster), 500 pods
with two interfaces each (one whose address the watcher chooses, one
static) are created as fast as the API stand-in accepts them. Steady: then 50 pods a second for 20
seconds, each created at its time. Measures the burst's throughput (first
create to last annotation) and each pod's latency (create to annotation).
The anchors, from other systems on much larger machines: Kube-OVN about
19 pods/s; ovn-kubernetes a P99 pod-ready time of about 3 s. The baseline
in the same run: one pod alone, on the idle watcher, before the burst.

The CPU line says what each process used during the burst, and what
anything else on the host did. The stand-in's work is the same in every run
(500 creates, 500 patches and their watch events): when it and every other
process used more CPU than usual at once, with nothing else running, the
host itself was slower for that run. One run of 254 pods/s here had the
stand-in at 0.45 s against 0.30-0.34 s, and every other process about 40%
up with it, at the same code as runs of 330-377.

Two legs, one after the other (never at once: they would share the cores):
``--legs debian12,debian13`` (the default). The leg of this machine's own
Debian runs here, on its OVN and Python (the venv's, on Debian 12: OVN
23.03, OVS 3.1, Python 3.11); the other runs this same module in a
container of the core-test image of its release (``.ci/core_tests.py``'s
``test_image``; Debian 13: OVN 25.03, whose ovn-northd handles port changes
incrementally, OVS 3.5, Python 3.13), with no network but its loopback and
the working tree mounted read-only, as the core's tests run there. The
container's processes share this machine's cores and kernel; the CPU line
of each leg names the versions it ran on.

Each leg's last line: ``debian<N>: pods=500 pods_per_s=<x> p50_ms=<y>
p99_ms=<z> steady_p99_ms=<w>``
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

from benchmarks.common import Ansible, cpu_seconds, percentile

PODS = 500
STEADY_RATE, STEADY_SECONDS = 50, 20
NETWORKS = [{"name": "dyn", "subnet": "10.100.0.0/16"}, {"name": "static", "subnet": "10.101.0.0/16"},
            {"name": "default-net", "subnet": "10.240.0.0/16"}]
# each leg and the Debian release whose packages it runs on
LEGS = {"debian12": "bookworm", "debian13": "trixie"}
CORE_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".ci", "core_tests.py")


def create(api, index):
    api.create_pod("bench", "pod%d" % index, {"ovnNetwork": json.dumps([
        {"name": "dyn", "interface": "net0"},
        {"name": "static", "interface": "net1", "ip_address": "10.101.%d.%d" % (index // 250, index % 250 + 2)},
    ])})
    return ("bench", "pod%d" % index)


def os_release():
    with open("/etc/os-release") as handle:
        return dict((k, v.strip('"')) for k, v in (line.rstrip("\n").split("=", 1) for line in handle if "=" in line))


def this_leg():
    """The leg this machine (or container) is: its Debian release."""
    codename = os_release().get("VERSION_CODENAME")
    return dict((release, leg) for leg, release in LEGS.items()).get(codename, "debian?")


def versions():
    """``OVN x, OVS y, Python z``: what this leg runs on."""
    def version(program):
        try:
            out = subprocess.run([program, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True, timeout=30, check=False).stdout
        except OSError:
            return "?"
        # "ovn-northd 25.03.0", "ovsdb-server (Open vSwitch) 3.5.0"
        words = out.splitlines()[0].split() if out.strip() else ["?"]
        return words[-1]
    return "OVN %s, OVS %s, Python %s" % (version("ovn-northd"), version("ovsdb-server"),
                                          platform.python_version())


def core_tests():
    """``.ci/core_tests.py``, the CI job that runs the core in the
    core-test image, as a module: its image and its container."""
    spec = importlib.util.spec_from_file_location("core_tests", CORE_TESTS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_container(leg, election="on"):
    """This benchmark's ``leg`` in a container of its release's core-test
    image, its output passed through; its exit code."""
    ci = core_tests()
    ci.host.install_host_packages()
    image = ci.test_image(LEGS[leg])
    print("%s: in a container of %s" % (leg, image), flush=True)
    argv = ci.in_container(image, "bench-watcher") + ["python3", "-m", "benchmarks.watcher", "--legs", leg,
                                                      "--election", election]
    return subprocess.run(argv, check=False, timeout=3600).returncode


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--legs", default=",".join(sorted(LEGS)),
                        help="the legs, in order, comma-separated, of %s (default: %%(default)s)" % ", ".join(
                            sorted(LEGS)))
    parser.add_argument("--election", choices=("on", "off"), default="on",
                        help="the watcher's leader election and NB fencing (off: one replica, to measure their cost)")
    args = parser.parse_args(argv)
    legs = [leg for leg in args.legs.split(",") if leg]
    unknown = [leg for leg in legs if leg not in LEGS]
    if unknown or not legs:
        parser.error("unknown legs %s: choose among %s" % (", ".join(unknown), ", ".join(sorted(LEGS))))
    here, failed = this_leg(), []
    for leg in legs:
        if leg == here:
            print("%s: here, on %s" % (leg, os_release().get("PRETTY_NAME", "?")), flush=True)
            try:
                measure(leg, args.election)
            except Exception:       # said, and the next leg still runs
                traceback.print_exc()
                failed.append(leg)
        elif in_container(leg, args.election) != 0:
            failed.append(leg)
        sys.stdout.flush()
    if failed:
        raise SystemExit("legs that failed: %s" % ", ".join(failed))


def measure(leg, election="on"):
    """One leg: the benchmark on this machine's OVN and Python."""
    ansible = Ansible()      # only for its collection path
    collections = ansible.collections
    from tests.harness.watcher_env import Cluster
    tmp = tempfile.mkdtemp(prefix="ovn4nfv-bench-watcher-")
    from ansible_collections.ovn4nfv.k8s.plugins.module_utils.daemons.watcher import Config
    workers = Config.DEFAULTS["workers"]
    env = Cluster(tmp, collections, networks=NETWORKS, workers=workers, leader_election=election == "on")
    try:
        started = "serving as the leader" if election == "on" else "resync: 0 pods"
        assert env.wait_log(started, 60), "the watcher did not start:\n" + env.log_text()
        alone = [create(env.api, PODS + STEADY_RATE * STEADY_SECONDS)]
        assert env.api.wait(lambda api: alone[0] in api.annotated_at, 60), env.log_text()
        # what each process spent during the burst: they share the machine's cores
        pids = dict((os.path.basename(path)[:-4], int(open(path).read())) for path in env.box.pidfiles)
        pids["watcher"] = env.proc.pid
        cpu_before = cpu_seconds(pids)
        burst = [create(env.api, index) for index in range(PODS)]
        done = env.api.wait(lambda api: all(k in api.annotated_at for k in burst), 600)
        assert done, "not every pod was annotated:\n" + env.log_text()
        cpu = dict((k, v - cpu_before[k]) for k, v in cpu_seconds(pids).items())
        steady, start = [], time.monotonic()
        for step in range(STEADY_RATE * STEADY_SECONDS):
            # pacing the arrivals, not waiting for a result
            time.sleep(max(0.0, start + step / float(STEADY_RATE) - time.monotonic()))
            steady.append(create(env.api, PODS + step))
        done = env.api.wait(lambda api: all(k in api.annotated_at for k in steady), 600)
        assert done, "not every steady pod was annotated:\n" + env.log_text()
        created, annotated = dict(env.api.created_at), dict(env.api.annotated_at)
    finally:
        log = env.log_text()
        code = env.stop()
        ansible.close()
        shutil.rmtree(tmp, ignore_errors=True)
    assert code == 0, "the watcher did not stop cleanly (%r):\n%s" % (code, log)

    def latencies(keys):
        return [(annotated[k] - created[k]) * 1000 for k in keys]
    span = max(annotated[k] for k in burst) - min(created[k] for k in burst)
    burst_ms, steady_ms = latencies(burst), latencies(steady)
    print("pods: %d with 2 interfaces (1 address chosen, 1 static), %d workers (the default)" % (PODS, workers))
    print("baseline, one pod alone on the idle watcher: %.0f ms" % latencies(alone)[0])
    print("burst, all created at once: a pod's latency is mostly its wait in the queue")
    ran_on = versions()
    print("CPU s during the burst (%s; %.2f s; this host has %d cores): %s, API stand-in and benchmark %.2f, "
          "anything else on the host %.2f" % (
              ran_on, span, os.cpu_count(), ", ".join("%s %.2f" % (k, v) for k, v in sorted(cpu.items())
                                                      if k not in ("this", "host")),
              cpu["this"], max(0.0, cpu["host"] - sum(v for k, v in cpu.items() if k != "host"))))
    print("steady: %d pods/s for %d s, p50 %.0f ms, p99 %.0f ms" % (
        STEADY_RATE, STEADY_SECONDS, percentile(steady_ms, 0.5), percentile(steady_ms, 0.99)))
    print("anchors: Kube-OVN ~19 pods/s; ovn-kubernetes P99 pod-ready ~3000 ms")
    print("%s: pods=%d pods_per_s=%.1f p50_ms=%.0f p99_ms=%.0f steady_p99_ms=%.0f election=%s" % (
        leg, PODS, PODS / span, percentile(burst_ms, 0.5), percentile(burst_ms, 0.99), percentile(steady_ms, 0.99),
        election))


if __name__ == "__main__":
    main()
