"""``python -m crawler.devservices``."""

from __future__ import annotations

import sys

from crawler.devservices.cli import main

if __name__ == "__main__":
    sys.exit(main())
