"""The exported HTML page: one self-contained file around the shared renderer's fragments.

Inline CSS only (screen, phone and print), no script, no font, image or stylesheet fetched
at view time; a Content-Security-Policy meta tag forbids scripts and remote loads even if
something slipped through the escaping.
"""

from __future__ import annotations

from pensieve import __version__
from pensieve.publish.document import Article
from pensieve.publish.render import escape, render_loaded

# Nothing may load or run: styles only from the page's own <style> element.
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def evidence_line(article: Article) -> str:
    """What the evidence says about the article, in one sentence (or "")."""
    state = article.evidence
    if state.status != "current" or not state.summary:
        return ""
    summary = state.summary

    def count(key: str) -> int:
        value = summary.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    parts = [
        f"{count('supported')} supported",
        f"{count('weak')} weakly supported",
        f"{count('unsupported')} unsupported",
    ]
    cited = summary.get("cited_sentences")
    if cited == 0:
        return ""  # nothing cited: "of 0 cited sentences, 0 supported" says nothing
    lead = f"of {cited} cited sentences, " if isinstance(cited, int) and not isinstance(cited, bool) else ""
    return f"Evidence check: {lead}" + ", ".join(parts) + "."


def html_page(article: Article, *, exported_at: str, bundle_links: bool = False) -> str:
    rendered = render_loaded(article, bundle_links=bundle_links)
    meta = [article.sources_note(), f"exported {exported_at[:10]}"]
    notices = list(rendered.warnings)
    if article.evidence.status == "absent" and not article.unsourced:
        meta.append("no evidence check yet")
    line = evidence_line(article)
    notice_html = ""
    if notices:
        notice_html = (
            '<div class="notice" role="status">' + "".join(f"<p>{escape(n)}</p>" for n in notices) + "</div>\n"
        )
    evidence_html = f'<p class="meta evidence-summary">{escape(line)}</p>\n' if line else ""
    references = ""
    if rendered.references_html:
        references = (
            '<section class="references-section" aria-labelledby="references">\n'
            '<h2 id="references">References</h2>\n' + rendered.references_html + "</section>\n"
        )
    archived = " Archived copies of the cited pages are in this bundle." if bundle_links else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f'<meta name="generator" content="Pensieve {escape(__version__)}">\n'
        f"<title>{escape(rendered.title)}</title>\n"
        f"<style>\n{rendered.css}\n</style>\n</head>\n<body>\n<main>\n"
        f'<header class="article-head">\n<h1>{escape(rendered.title)}</h1>\n'
        f'<p class="meta">{escape(" · ".join(meta))}</p>\n{evidence_html}</header>\n'
        f"{notice_html}{rendered.body_html}{references}"
        f'<footer class="export-foot"><p>Exported by Pensieve {escape(__version__)} from '
        f"{escape(article.project_id)}/{escape(article.name)} on {escape(exported_at)}. "
        f"Each reference gives the date Pensieve fetched the page.{archived}</p></footer>\n"
        "</main>\n</body>\n</html>\n"
    )
