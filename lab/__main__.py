"""``python -m lab``: the lab's command line (lab/lab.py)."""

import sys

from lab.lab import main

sys.exit(main())
