"""`export --format md` keeps only http(s) and in-document links, judged on the OUTPUT by a
CommonMark parser (markdown-it, configured here independently of the code under test, with
raw HTML and tables on and off and no scheme filter of its own), whatever form the hostile
target was written in: entities, escapes, `<...>` with blanks, definitions in block quotes
and lists or with the target on the next line, raw HTML, images, the front matter."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pensieve.publish.markdown import neutralise_markdown
from tests.conftest import Home
from tests.publish_fixtures import complete_project

PROJECT = "vdb"


def _parsers() -> Iterator[MarkdownIt]:
    for html in (True, False):
        for table in (True, False):
            md = MarkdownIt("commonmark", {"html": html})
            if table:
                md.enable("table")
            md.validateLink = lambda url: True  # type: ignore[method-assign]
            yield md


def _tokens(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        yield from _tokens(token.children or [])


def offences(markdown: str) -> list[str]:
    """Every link whose target is not http(s) with a host nor `#...`, every image and every
    piece of raw HTML that a CommonMark renderer would make of `markdown`."""
    found = []
    for md in _parsers():
        for token in _tokens(md.parse(markdown)):
            if token.type in ("image", "html_inline", "html_block"):
                found.append(f"{token.type}: {token.content or token.attrGet('src')}")
            elif token.type == "link_open":
                href = re.sub(r"[\x00-\x20\x7f]", "", str(token.attrGet("href")))
                parts = urlsplit(href)
                if not href.startswith("#") and not (parts.scheme.lower() in ("http", "https") and parts.netloc):
                    found.append(f"link: {href}")
    return found


def hrefs(markdown: str) -> list[str]:
    md = MarkdownIt("commonmark")
    return [str(t.attrGet("href")) for t in _tokens(md.parse(markdown)) if t.type == "link_open"]


# Each form CommonMark resolves to `javascript:alert(1)` (or another unsafe target).
HOSTILE = {
    "decimal entity": "[a](javascript&#58;alert(1))",
    "named entity": "[a](javascript&colon;alert(1))",
    "entity in the scheme": "[a](java&#x73;cript:alert(1))",
    "hex entity, upper case": "[a](JaVaScRiPt&#X3A;alert(1))",
    "backslash escape": "[a](javascript\\:alert(1))",
    "bracketed with a leading space": "[a](< javascript:alert(1)>)",
    "bracketed with a tab": "[a](<\tjavascript:alert(1)>)",
    "title after the target": '[a](javascript:alert(1) "t")',
    "definition in a block quote": "> [r]: javascript:alert(1)\n\nsee [r]",
    "definition in a list": "- [r]: javascript:alert(1)\n\nsee [r]",
    "definition, target on the next line": "[r]:\njavascript:alert(1)\n\nsee [r]",
    "definition in a quoted list, next line": "> - [r]:\n>   javascript:alert(1)\n\nsee [r]",
    "definition with a two-line label": "[foo\nbar]: javascript:alert(1)\n\nsee [foo bar]",
    "definition with an entity": "[r]: javascript&#58;alert(1)\n\nsee [r][]",
    "collapsed reference": "[r][]\n\n[r]: vbscript:msgbox(1)",
    "data URL": "[a](data:text/html;base64,PHNjcmlwdD4=)",
    "protocol-relative": "[a](//evil.example/x)",
    "no host": "[a](http:evil.example)",
    "autolink": "<javascript:alert(1)>",
    "email autolink": "<a@evil.example>",
    "raw html link": '<a href="javascript:alert(1)">x</a>',
    "raw html image": "<img src=x onerror=alert(1)>",
    "html comment": "<!-- x --> <?php ?>",
    "inline image": "![x](https://evil.example/pixel.png)",
    "reference image": "![x][p]\n\n[p]: https://evil.example/pixel.png",
    "shortcut image": "![p]\n\n[p]: https://evil.example/pixel.png",
    "in a table cell": "| a | b |\n|---|---|\n| [x](javascript&#58;1) | y |",
    "pipe splitting a table link": "| a |\n|---|\n| [x|y](javascript:alert(1)) |",
    "in emphasis": "*[x](javascript&#x3a;1)*",
    "nested brackets": "[[x](javascript:1)](javascript:2)",
    "code span that is not one": "`` [x](javascript:alert(1)) ` and [y](javascript:alert(2))",
    "backtick inside the target": "[x](javascript:alert(`1`))",
    "relative path": "[a](../admin/delete)",
}


@pytest.mark.parametrize("source", HOSTILE.values(), ids=HOSTILE.keys())
def test_each_hostile_form_leaves_no_unsafe_link(source: str) -> None:
    assert offences(source), "the form must be hostile to begin with"
    out = neutralise_markdown(source)
    assert not offences(out), out


def test_safe_links_and_code_are_kept() -> None:
    source = (
        "See [the paper](https://ok.example/p?q=1#s) and [below](#sec-results), <https://ok.example/a>.\n\n"
        "[ref]: https://ok.example/ref\n\nand [ref] too, `[x](javascript:alert(1))` is code.\n\n"
        "```\n<script>alert(1)</script> [y](javascript:1)\n```\n"
    )
    out = neutralise_markdown(source)
    assert not offences(out)
    assert hrefs(out) == [
        "https://ok.example/p?q=1#s",
        "#sec-results",
        "https://ok.example/a",
        "https://ok.example/ref",
    ]
    assert "`[x](javascript:alert(1))`" in out and "<script>alert(1)</script> [y](javascript:1)" in out


def test_a_bad_target_costs_only_itself_and_its_text_stays() -> None:
    out = neutralise_markdown("[bad](java&#x73;cript:x) and [good](https://ok.example/)")
    assert hrefs(out) == ["#", "https://ok.example/"]
    assert "bad" in out and "good" in out


# -- fuzz: link forms built from pieces the parser resolves -------------------------------

_COLONS = [":", "&#58;", "&colon;", "&#x3a;", "&#X3A;", "&#0058;", "\\:"]
_SCHEMES = ["javascript", "JavaScript", "java&#x73;cript", "jav&#97;script", "vbscript", "data", "file", "mailto"]
_BLANKS = ["", " ", "\t", "\n", "  \n", "\x0b"]


@st.composite
def hostile_markdown(draw: st.DrawFn) -> str:
    target = draw(st.sampled_from(_SCHEMES)) + draw(st.sampled_from(_COLONS)) + "alert(1)"
    blank = draw(st.sampled_from(_BLANKS))
    if draw(st.booleans()):
        target = f"<{blank}{target}>"
    prefix = draw(st.sampled_from(["", "> ", "- ", "1. ", "> - ", "   ", "* > "]))
    label = draw(st.sampled_from(["r", "R", "foo\nbar", "a b"]))
    form = draw(st.integers(0, 5))
    if form == 0:
        piece = f"[x]({blank}{target})"
    elif form == 1:
        piece = f"![x]({target})"
    elif form == 2:
        cont = "\n" + prefix.replace("-", " ").replace("1.", "  ").replace("*", " ") if draw(st.booleans()) else " "
        piece = f"{prefix}[{label}]:{cont}{target}\n\nsee [{label.replace(chr(10), ' ')}]"
    elif form == 3:
        piece = f"| h |\n|---|\n| [x]({target}) |"
    elif form == 4:
        piece = f'<a href="{target}">x</a>'
    else:
        piece = f"<{target}>"
    noise = draw(st.text(alphabet="[]()<>`*_!\\&#:; \nab", max_size=12))
    return draw(st.sampled_from([piece + noise, noise + piece, prefix + piece]))


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_markdown())
def test_fuzzed_link_forms_leave_no_unsafe_link(source: str) -> None:
    assert not offences(neutralise_markdown(source))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="[]()<>`*_!\\&#:;|-> \nabjvs", max_size=60))
def test_arbitrary_punctuation_leaves_no_unsafe_link(source: str) -> None:
    assert not offences(neutralise_markdown(source + " [x](javascript:1)"))


# -- the command -------------------------------------------------------------------------


@pytest.fixture
def project(home: Home) -> Path:
    return complete_project(home, PROJECT)


def test_the_exported_markdown_has_no_unsafe_link(home: Home, project: Path) -> None:
    final = project / "final.md"
    text = final.read_text(encoding="utf-8")
    body, references = text.split("\n## References", 1)
    hostile = "\n\n".join(HOSTILE.values())
    title = "# \\[t\\](javascript&#58;alert(1)) \\<img src=x onerror=alert(1)>"
    rest = body.split("\n", 1)[1]
    final.write_text(f"{title}\n{rest}\n\n{hostile}\n\n## References{references}", encoding="utf-8")
    assert offences(final.read_text(encoding="utf-8"))
    for args in ([], ["--front-matter"]):
        result = home.run("export", PROJECT, "--format", "md", *args)
        assert result.exit_code == 0, result.stderr
        out = Path(result.stdout.strip()).read_text(encoding="utf-8")
        assert not offences(out), (args, offences(out))
        # Cited sources keep their links; the reference list is still there.
        assert "https://www.example.org/vector-indexes" in hrefs(out)
    meta = yaml.safe_load(out.split("---\n")[1])
    assert meta["title"] == "[t](javascript&#58;alert(1)) <img src=x onerror=alert(1)>"
    # The JSON export's markdown fields hold to the same rule.
    result = home.run("export", PROJECT, "--format", "json")
    assert result.exit_code == 0, result.stderr
    fields = list(_markdown_fields(json.loads(Path(result.stdout.strip()).read_text(encoding="utf-8"))))
    assert len(fields) > 3 and not [f for f in fields if offences(f)]


def _markdown_fields(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "markdown" and isinstance(item, str):
                yield item
            else:
                yield from _markdown_fields(item)
    elif isinstance(value, list):
        for item in value:
            yield from _markdown_fields(item)
