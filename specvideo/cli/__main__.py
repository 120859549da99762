"""``python -m specvideo.cli``."""

import sys

from specvideo.cli import main

sys.exit(main())
