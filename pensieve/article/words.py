"""Words of an article as the checks compare them: quotations folded so a faithful one
matches, a quotation stripped of its table-cell dressing, one line shortened at a word."""

from __future__ import annotations

import re
import unicodedata

from pensieve.untrusted import INVISIBLE

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "`": "'",
        # Double quotes fold into single ones too: a quotation nested in quotes swaps them.
        '"': "'",
        "\u201c": "'",
        "\u201d": "'",
        "\u201e": "'",
        "\u201f": "'",
        "\u2033": "'",
        "\u00ab": "'",
        "\u00bb": "'",
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2010": "-",
        "\u2011": "-",
    }
)


def normalize(text: str) -> str:
    """Case, quotes, dashes, soft hyphens and whitespace folded so a faithful quotation matches."""
    text = unicodedata.normalize("NFKC", text)
    text = INVISIBLE.sub("", text)
    text = text.translate(_QUOTES)
    text = text.casefold()
    return " ".join(text.split())


def strip_markdown_quote(text: str) -> str:
    """A quotation as written in a table cell: drop surrounding quotes, ellipses, emphasis."""
    text = text.strip().strip("*_").strip()
    text = text.strip("\"'\u201c\u201d\u2018\u2019\u00ab\u00bb").strip()
    return text.strip(".\u2026 ").strip()


def shorten(text: str, limit: int) -> str:
    """One line of at most about `limit` characters, cut at a word and marked with " …"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    # A cut inside "[S1, S2]" would leave a citation no one can resolve: cut before it.
    return re.sub(r"\s*\[[^\]]*$", "", text[:limit].rsplit(" ", 1)[0]) + " …"
