"""The podman lab, a package of rooms: run it from the checkout's root as
``python -m lab <command>`` (lab/lab.py is its command line)."""
