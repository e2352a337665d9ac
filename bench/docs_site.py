"""A directory of HTML (the Python documentation from Debian's ``python3.11-doc``) on loopback."""

from __future__ import annotations

import threading
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

from crawler.demo.server import BackgroundHTTPServer

PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")


class DocsSite(BackgroundHTTPServer):
    """Serves ``root`` and counts the requests per path, like ``crawler.demo.site.Site``."""

    def __init__(self, root: Path = PYTHON_DOCS) -> None:
        if not (root / "index.html").is_file():
            raise FileNotFoundError(
                f"{root}/index.html is missing: install Debian's python3.11-doc (make bench)"
            )
        self.pages = sum(1 for _ in root.rglob("*.html"))
        self.hits: Counter[str] = Counter()
        lock = threading.Lock()
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def send_head(self) -> Any:
                with lock:
                    site.hits[self.path] += 1
                return super().send_head()

        super().__init__(partial(Handler, directory=str(root)))  # type: ignore[arg-type]

    def url(self, index: int) -> str:
        if index != 0:
            raise ValueError("a documentation site has one entry page (index 0)")
        return self.base_url + "/index.html"
