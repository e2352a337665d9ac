"""Screenshot ``crawler top --once --color`` into docs/img/crawler-top.png (for the README).

Needs a running crawl (REDIS_URL, or ``--redis``), Playwright and Debian's Chromium::

    .venv/bin/python scripts/screenshot_top.py --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SGR = re.compile(r"\x1b\[([0-9;]*)m")
STYLES = {
    "1": "font-weight:bold",
    "2": "color:#8b949e",
    "31": "color:#ff7b72",
    "32": "color:#3fb950",
    "33": "color:#d29922",
}
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #0d1117; }}
pre {{ display: inline-block; margin: 0; padding: 16px 20px; color: #c9d1d9; background: #0d1117;
      font: 14px/1.4 "DejaVu Sans Mono", monospace; }}
</style></head><body><pre>{body}</pre></body></html>"""


def ansi_to_html(text: str) -> str:
    """HTML of ANSI-coloured text (SGR codes of ``crawler top`` only)."""
    parts: list[str] = []
    open_spans = 0
    position = 0
    for match in SGR.finditer(text):
        parts.append(html.escape(text[position : match.start()]))
        position = match.end()
        for code in match.group(1).split(";"):
            if code in ("", "0"):
                parts.append("</span>" * open_spans)
                open_spans = 0
            elif code in STYLES:
                parts.append(f'<span style="{STYLES[code]}">')
                open_spans += 1
    parts.append(html.escape(text[position:]))
    parts.append("</span>" * open_spans)
    return "".join(parts)


def capture_top(redis_url: str | None, spider: str | None) -> str:
    command = [sys.executable, "-m", "crawler", "top", "--once", "--color"]
    command += [spider] if spider else []
    command += ["--redis", redis_url] if redis_url else []
    return subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def screenshot(page_html: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(device_scale_factor=2)
            page.set_content(page_html)
            page.locator("pre").screenshot(path=str(out))
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spider", nargs="?", help="spider to show (default: all found)")
    parser.add_argument("--redis", default=None, help="Redis URL (default: REDIS_URL)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs/img/crawler-top.png")
    args = parser.parse_args()
    text = capture_top(args.redis, args.spider)
    screenshot(PAGE.format(body=ansi_to_html(text)), args.out)
    print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
