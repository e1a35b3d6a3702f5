"""``python -m pyflink_tensair.cluster``: see :mod:`pyflink_tensair.cluster.cli`."""

import sys

from .cli import main

sys.exit(main())
