"""The API's credentials, and the API itself: the Kubernetes API stand-in
(``tests/harness/kube_api_standin.py``; no real API server can be
installed on this machine) run on the set's master over HTTPS with RBAC,
its CA and tokens made here, and each Kubernetes node registered as its
kubelet would.
"""

import hashlib
import json
import os

from lab.host import ROOT, exec_in, kubelet_argv, podman

API_PORT = 6443


def standin():
    """The stand-in's module (the harness's)."""
    from tests.harness import kube_api_standin
    return kube_api_standin


def api_credentials(session, lab):
    """The set's API credentials, made once per set (``down`` forgets them):
    a CA and the stand-in's certificate, a token file as kube-apiserver
    takes it (the admin, and the watcher's and the node agent's service
    accounts), and a kubeconfig for each, carrying the CA. The inventories
    read the kubeconfigs from here."""
    directory = session.path("api-" + lab.name)
    if os.path.exists(os.path.join(directory, "node-agent.kubeconfig")):
        return directory
    kube = standin()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    ca, _cert, _key = kube.make_tls(directory, [lab.address(lab.api)])
    server = "https://%s:%d" % (lab.address(lab.api), API_PORT)
    accounts = {"admin": (kube.ADMIN, ["system:masters"]),
                "watcher": kube.service_account_user(kube.WATCHER),
                "node-agent": kube.service_account_user(kube.NODE_AGENT)}
    lines = []
    for name, (user, groups) in accounts.items():
        token = hashlib.sha256(os.urandom(32)).hexdigest()
        lines.append('%s,%s,%s,"%s"' % (token, user, user, ",".join(groups)))
        with open(os.path.join(directory, name + ".kubeconfig"), "w") as handle:
            json.dump(kube.kubeconfig_document(server, token, ca, name="lab"), handle, indent=2)
        if name == "admin":
            with open(os.path.join(directory, "admin.token"), "w") as handle:
                handle.write(token + "\n")
    with open(os.path.join(directory, "tokens.csv"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return directory


def start_api(session, lab=None):
    """The Kubernetes API stand-in, as a process on the set's master, over
    HTTPS and with RBAC: the product's manifests applied, the tokens of
    :func:`api_credentials`. Every container of the set gets the CA and
    the admin's token in /etc/ovn4nfv-lab, for the lab's kubelet."""
    lab = lab or session.lab_set()
    master, address = lab.api, lab.address(lab.api)
    directory = api_credentials(session, lab)
    for name in lab.nodes:
        exec_in(name, "mkdir", "-p", "-m", "0700", "/etc/ovn4nfv-lab")
        for item in ("ca.crt", "admin.token"):
            podman("cp", os.path.join(directory, item), "%s:/etc/ovn4nfv-lab/%s" % (name, item))
        exec_in(name, "sh", "-c", "echo https://%s:%d > /etc/ovn4nfv-lab/api" % (address, API_PORT))
    if exec_in(master, "test", "-e", "/run/ovn4nfv-lab-api.pid", check=False).returncode == 0:
        register_nodes(lab)
        return
    files = [(os.path.join(directory, n), n) for n in ("server.crt", "server.key", "tokens.csv")]
    files += [(os.path.join(ROOT, "roles", role, "files", "rbac.yaml"), role + "-rbac.yaml")
              for role in ("watcher", "cni")]
    exec_in(master, "mkdir", "-p", "-m", "0700", "/etc/kube-api-standin")
    for path, name in files:
        podman("cp", path, master + ":/etc/kube-api-standin/" + name)
    # the stand-in is one file of the standard library's modules only
    podman("cp", os.path.abspath(standin().__file__), master + ":/usr/local/lib/kube_api_standin.py")
    exec_in(master, "sh", "-c", "python3 /usr/local/lib/kube_api_standin.py --listen %s:%d "
            "--tls-cert-file /etc/kube-api-standin/server.crt --tls-private-key-file /etc/kube-api-standin/server.key "
            "--token-auth-file /etc/kube-api-standin/tokens.csv --rbac /etc/kube-api-standin/watcher-rbac.yaml "
            "--rbac /etc/kube-api-standin/cni-rbac.yaml "
            ">/var/log/kube-api-standin.log 2>&1 & echo $! > /run/ovn4nfv-lab-api.pid" % (address, API_PORT))
    exec_in(master, "python3", "-c", WAIT_HTTP % ("https://%s:%d/api/v1/pods" % (address, API_PORT)))
    register_nodes(lab)


def register_nodes(lab):
    """Each of the set's Kubernetes nodes registers its Node, as its kubelet
    would on start (one registered already is kept)."""
    for name in lab.kube:
        exec_in(name, "env", "LAB_API=https://%s:%d" % (lab.address(lab.api), API_PORT),
                *(kubelet_argv(name) + ["register", lab.address(name)]))


# Run on the master: until the stand-in answers the admin over HTTPS.
WAIT_HTTP = """
import ssl, time, urllib.error, urllib.request
token = open("/etc/ovn4nfv-lab/admin.token").read().strip()
context = ssl.create_default_context(cafile="/etc/ovn4nfv-lab/ca.crt")
deadline = time.monotonic() + 20
while True:
    try:
        request = urllib.request.Request(%r, headers={"Authorization": "Bearer " + token})
        urllib.request.urlopen(request, timeout=2, context=context).read()
        break
    except urllib.error.HTTPError:
        raise
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
"""
