"""``python -m bench.cluster up|down|status ...`` (the same as ``python -m bench cluster ...``)."""

import sys

from .cli import main

sys.exit(main())
