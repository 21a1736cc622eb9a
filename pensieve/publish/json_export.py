"""The article as JSON for a CMS: sections, sentences with their citations and evidence,
references with metadata. The schema (`pensieve.article/1`) is documented in the README.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it.token import Token

from pensieve import __version__
from pensieve.article.sentences import split_sentences as segment_sentences
from pensieve.publish.document import PLACEHOLDER, Article, CiteItem, Reference
from pensieve.publish.markdown import neutralise_markdown
from pensieve.publish.render import html_renderer

SCHEMA = "pensieve.article/1"
_BRACKETED = re.compile(r"\[(" + PLACEHOLDER.pattern + r")\]")


def _inline_text(token: Token) -> str:
    """An inline token as plain text, placeholders kept."""
    out: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif child.type == "image":
            out.append(f"[image: {''.join(c.content for c in child.children or [])}]")
    return " ".join("".join(out).split())


def split_sentences(text: str) -> list[str]:
    """Sentences of a block's plain text (placeholders kept with the sentence they close),
    split as the evidence check splits them (evidence.segment: abbreviations and initials
    do not end a sentence), so the export's sentences are the ones evidence.json judged."""
    # Each citation placeholder is bracketed while splitting, so that the splitter keeps it
    # with the sentence it closes as it keeps a written `[S3]`; no text holds these characters.
    bracketed = PLACEHOLDER.sub(lambda m: f"[{m.group(0)}]", text)
    return [_BRACKETED.sub(r"\1", span.text) for span in segment_sentences(bracketed, 0, len(bracketed))]


def _citation_json(item: CiteItem) -> dict[str, Any]:
    evidence = item.evidence
    return {
        "number": item.number,
        "source": item.source_id,
        "written": item.label,
        "resolved": item.source_id is not None,
        "verdict": item.verdict,
        "score": evidence.score if evidence else None,
        "passage": evidence.passage if evidence else None,
        "missing": list(evidence.missing) if evidence else [],
        "judge": evidence.judge if evidence else None,
    }


def _sentence_json(article: Article, sentence: str) -> dict[str, Any]:
    citations: list[dict[str, Any]] = []
    findings: list[str] = []
    for match in PLACEHOLDER.finditer(sentence):
        for item in article.citations[int(match.group(1))].items:
            citations.append(_citation_json(item))
            if item.evidence is not None:
                findings.extend(f for f in item.evidence.findings if f not in findings)
    verdicts = [c["verdict"] for c in citations]
    verdict = None
    if citations:
        # The evidence file's rule (the best over the sentence's citations), but a sentence
        # with an unchecked citation is "unchecked", never "supported".
        order = ["unchecked", "unsupported", "weak", "supported"]
        verdict = "unchecked" if "unchecked" in verdicts else max(verdicts, key=order.index)
    return {
        "text": article.plain(sentence),
        "citations": citations,
        "verdict": verdict,
        "findings": findings,
    }


def json_export(article: Article, *, exported_at: str) -> dict[str, Any]:
    md = html_renderer()
    tokens = md.parse(article.markdown)
    lines = article.markdown.splitlines()
    env = {"article": article}
    # Sections start at each top-level heading; content before the first is a section
    # without a heading.
    bounds = [i for i, t in enumerate(tokens) if t.type == "heading_open" and t.level == 0]
    if not bounds or bounds[0] != 0:
        bounds.insert(0, 0)
    sections: list[dict[str, Any]] = []
    for position, start in enumerate(bounds):
        end = bounds[position + 1] if position + 1 < len(bounds) else len(tokens)
        heading_token = tokens[start] if tokens and tokens[start].type == "heading_open" else None
        body_start = start + 3 if heading_token is not None else start
        body = tokens[body_start:end]
        sentences = [
            _sentence_json(article, sentence)
            for token in body
            if token.type == "inline"
            for sentence in split_sentences(_inline_text(token))
        ]
        line_start = body[0].map[0] if body and body[0].map else None
        line_end = next((t.map[1] for t in reversed(body) if t.map), None)
        markdown = "\n".join(lines[line_start:line_end]).strip() if line_start is not None else ""
        if heading_token is None and not body:
            continue
        sections.append(
            {
                "heading": article.plain(_inline_text(tokens[start + 1])) if heading_token is not None else None,
                "level": int(heading_token.tag[1:]) if heading_token is not None else 0,
                "sentences": sentences,
                "markdown": neutralise_markdown(article.plain(markdown, marked=True)),
                "html": md.renderer.render(body, md.options, env),
            }
        )
    state = article.evidence
    return {
        "schema": SCHEMA,
        "generator": f"pensieve {__version__}",
        "exported_at": exported_at,
        "project": article.project_id,
        "artifact": article.name,
        "artifact_sha256": article.sha256,
        "title": article.title,
        "evidence": {"status": state.status, "generated_at": state.generated_at, "summary": state.summary},
        "sections": sections,
        "references": [_reference_json(ref) for ref in article.references],
        "warnings": list(article.warnings),
    }


def _reference_json(ref: Reference) -> dict[str, Any]:
    parts = ref.parts
    source = ref.source
    return {
        "number": ref.number,
        "source": ref.source_id,
        "label": parts.label,
        "authors": list(parts.authors),
        "title": parts.title,
        "site": parts.site,
        "year": parts.year or None,
        "venue": parts.venue or None,
        "publisher": parts.publisher or None,
        "published": parts.published or None,
        "doi": parts.doi or None,
        "pages": parts.pages or None,
        "url": parts.url,
        "requested_url": source.url,
        "fetched_at": parts.fetched_at,
        "archive": {
            "file": ref.archived_file,
            "fetched_sha256": source.sha256,
            "fetched_bytes": source.size,
            "content_type": source.content_type,
        },
        "entry": parts.text(),
    }
