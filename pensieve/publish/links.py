"""Which link targets written by a model or found on a page may become links: one policy
for every place Pensieve renders one (the HTML export, the DOCX, reference entries, the
studio's pages).

A link may go to an http(s) URL with a host, or to a place in this document (`#id`).
Nothing else: no javascript:, data:, vbscript:, file: or mailto:, no protocol-relative
`//host` (another host under whatever scheme the page has), and no relative path (in the
studio it would open another of its own pages; in an export, a file next to it).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pensieve.untrusted import INVISIBLE

# Browsers drop these before they read a URL's scheme ("java\tscript:" is javascript:).
_BLANKS = re.compile(r"[\x00-\x20\x7f]")


def safe_link(url: str, *, in_document: bool = True) -> str | None:
    """The link target as it may be written (blanks, control and invisible characters
    dropped, as a browser would read it), or None when it may not be a link.

    in_document=False: only an outside URL may be (a reference entry's link, a DOCX
    hyperlink, which has no `#id` of its own to go to)."""
    target = INVISIBLE.sub("", _BLANKS.sub("", url))
    if target.startswith("#"):
        return target if in_document else None
    try:
        parts = urlsplit(target)
        host = parts.hostname
    except ValueError:  # an unbalanced "[" in the host, a port that is no number...
        return None
    return target if parts.scheme.lower() in ("http", "https") and host else None
