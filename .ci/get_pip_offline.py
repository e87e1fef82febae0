"""Offline stand-in for the pip bootstrap script ansible-test downloads.

ansible-test fetches ``get-pip.py`` from a host that this project's
machines cannot reach. This script does the same job from what is local:
pip comes from the standard library's ``ensurepip``, and whatever else was
asked for is installed from the configured package index.
"""

import os
import subprocess
import sys

DROPPED = ("--no-setuptools", "--no-wheel")


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
    env = dict(os.environ)
    # ensurepip points PIP_CONFIG_FILE at /dev/null, hiding the machine's index settings.
    if env.get("PIP_CONFIG_FILE") == os.devnull:
        del env["PIP_CONFIG_FILE"]
    args = [a for a in sys.argv[1:] if a not in DROPPED]
    if args:
        subprocess.check_call([sys.executable, "-m", "pip", "install"] + args, env=env)


if __name__ == "__main__":
    main()
