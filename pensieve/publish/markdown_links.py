"""Links in exported Markdown, decided by a CommonMark parser rather than by patterns.

Only two kinds of link target may reach a reader: http(s) URLs with a host, and in-document
targets (`#...`); no image (it would be fetched on view) and no raw HTML survive. CommonMark
resolves a target through entities (`javascript&#58;`), backslash escapes (`javascript\\:`),
`<...>` brackets with leading spaces, and link reference definitions placed in block quotes
or lists or with the target on the next line, so a pattern that looks for `scheme:` cannot
be trusted to see them all. Hence two steps:

1. `rewrite_targets`: each inline or definition target found in the text is parsed as the
   parser parses it and, when unsafe, replaced by `#` (the link text stays);
2. `unsafe_lines`: the result is parsed by markdown-it (raw HTML on, and off when there
   was some; tables on and off, as different renderers would) and every block still
   holding an unsafe link, an image or raw HTML is named by its lines, which
   `escape_lines` then makes literal text (`[`, `]` and `<` backslash-escaped), until the
   parser finds nothing.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.common.utils import unescapeAll
from markdown_it.helpers import parseLinkDestination
from markdown_it.token import Token

from pensieve.article.blocks import code_spans
from pensieve.publish.links import safe_link

# Where a link target starts: after `](` (inline link or image) or after the `]:` of a
# definition, with the blanks, one line break and container marks (`>` of a block quote,
# the indent of a list item) CommonMark allows before it.
_TARGET_START = re.compile(r"\](?:\(|:)[ \t]*(?:\n[ \t>]*)?")
# What makes a character active in inline Markdown: escaping these leaves no link, image,
# autolink or raw HTML in a line (an entity such as `&#91;` is never a structural `[`; it
# matters only in a target, and with no bracket there is no target).
_ACTIVE = frozenset("[]<")
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
# Rounds of escaping before the whole text is escaped (each round escapes every block the
# parser still finds unsafe; two suffice for anything seen so far).
_ROUNDS = 4


def allowed_target(url: str) -> bool:
    """An http(s) URL with a host or an in-document `#...` target: the rule of
    pensieve.publish.links, which every renderer follows."""
    return safe_link(url) is not None


def rewrite_targets(text: str) -> str:
    """Every link target in `text` that resolves (entities and escapes undone) to something
    other than an allowed target is replaced by `#`."""
    out: list[str] = []
    position = 0
    for match in _TARGET_START.finditer(text):
        start = match.end()
        if start < position:
            continue
        result = parseLinkDestination(text, start, len(text))
        if not result.ok or result.pos == start:
            continue
        if not allowed_target(unescapeAll(result.str)):
            out.append(text[position:start])
            # On a line of its own a bare `#` would be a heading: `<#>` is still a target.
            out.append("<#>" if "\n" in match.group(0) else "#")
            position = result.pos
    out.append(text[position:])
    return "".join(out)


def _judge(*, html: bool, tables: bool) -> MarkdownIt:
    """markdown-it as a renderer may be configured. Every target is let through
    (`validateLink`) so that the check sees what a renderer without markdown-it's own scheme
    filter would link."""
    md = MarkdownIt("commonmark", {"html": html, "linkify": False, "typographer": False})
    md.enable(["strikethrough"] + (["table"] if tables else []))
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


def _unsafe(token: Token) -> bool:
    if token.type in ("html_inline", "html_block", "image"):
        return True
    return token.type == "link_open" and not allowed_target(str(token.attrGet("href") or ""))


def unsafe_lines(text: str) -> set[int]:
    """Line numbers (from 0) of every block in which some parser finds a link to anything
    but an allowed target, an image or raw HTML."""
    lines: set[int] = set()
    html_found = False
    # Raw HTML on, tables on and off (a `|` splits a table row before links are read). With
    # raw HTML off the parse differs only where HTML was recognised, which is an offence
    # already, so it is needed only when there was some.
    judges = [(True, True), (True, False), (False, True), (False, False)]
    for html, tables in judges:
        if not html and not html_found:
            break
        for token in _judge(html=html, tables=tables).parse(text):
            offenders = [token] if _unsafe(token) else [c for c in token.children or [] if _unsafe(c)]
            html_found = html_found or any(t.type.startswith("html_") for t in offenders)
            if offenders and token.map is not None:
                lines.update(range(token.map[0], max(token.map[1], token.map[0] + 1)))
    return lines


def _escape_active(line: str) -> str:
    """The line with every active character backslash-escaped; escapes already there are
    kept (so `\\[` stays one literal bracket, not a backslash and a bracket)."""
    out: list[str] = []
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line) and line[i + 1] in _ASCII_PUNCTUATION:
            out.append(line[i : i + 2])
            i += 2
            continue
        out.append("\\" + char if char in _ACTIVE else char)
        i += 1
    return "".join(out)


def escape_lines(text: str, numbers: set[int], *, keep_code: bool) -> str:
    """`text` with the active characters of the given lines escaped; with `keep_code`, the
    code (fenced blocks, inline spans) in them is left as it is."""
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    code = code_spans(text) if keep_code else []
    for number in sorted(n for n in numbers if n < len(lines)):
        line, start = lines[number], starts[number]
        pieces, position = [], 0
        for code_start, code_end in code:
            if code_end <= start or code_start >= start + len(line):
                continue
            a, b = max(code_start - start, 0), min(code_end - start, len(line))
            pieces.append(_escape_active(line[position:a]))
            pieces.append(line[a:b])
            position = b
        pieces.append(_escape_active(line[position:]))
        lines[number] = "".join(pieces)
    return "\n".join(lines)


def make_links_safe(text: str) -> str:
    """`text` whose every link, as markdown-it resolves it, is allowed, with no image and no
    raw HTML: a block the parser finds unsafe becomes literal text (what it says is kept,
    its links are not). Run `rewrite_targets` on the prose first so that an ordinary bad
    target costs only itself."""
    escaped: set[int] = set()
    for _ in range(_ROUNDS):
        bad = unsafe_lines(text)
        if not bad:
            return text
        # A line escaped once around its code spans is escaped whole the next time: the
        # code the pattern saw may not be the code the parser saw.
        text = escape_lines(text, bad - escaped, keep_code=True)
        text = escape_lines(text, bad & escaped, keep_code=False)
        escaped |= bad
    return escape_lines(text, set(range(text.count("\n") + 1)), keep_code=False)
