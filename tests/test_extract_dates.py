"""Page extraction keeps the title and text only: it must not pay for htmldate's extensive
date search, which loads every dateparser locale (6-7 CPU-s once per process) on the first
page holding a date-like string such as "2025H2" (a real design document did)."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import sys
from pensieve.web.extract import extract
paragraphs = b"<p>Propose a slate of 41 goals for 2025H2.</p><p>Each goal has an owner and a champion.</p>"
head = b"<html><head><title>Project goals</title></head><body><article><h1>Project goals</h1>"
body = head + paragraphs + b"</article></body></html>"
page = extract(body, "text/html", "utf-8", "http://127.0.0.1/goals")
assert page.title == "Project goals", page.title
assert "slate of 41 goals for 2025H2" in page.text, page.text[:200]
print("dateparser.languages.loader" in sys.modules)
"""


def test_extraction_never_loads_the_date_parsers_locales() -> None:
    # A fresh interpreter: another test may already have loaded dateparser in this one.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
