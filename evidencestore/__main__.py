"""``python -m evidencestore``."""

import sys

from .cli import main

sys.exit(main())
