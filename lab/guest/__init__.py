"""The lab's VM guest: lab/guest/build.py makes it from Debian's packages."""
