"""Entry point of ``python -m crawler.demo``."""

from __future__ import annotations

import sys

from crawler.demo.run import main

sys.exit(main())
