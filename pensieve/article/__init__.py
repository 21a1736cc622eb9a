"""The one article reader: an artifact's markdown turned into blocks, sentences, citations
and references. Pure functions over strings (no I/O, no model), below everything that reads
an article: the citation check, the evidence check, the tools and publishing.

- `blocks`: code spans, prose blocks and paragraphs, the title, the reference section and
  the Reviser's notes (where the article's body ends);
- `citations`: the citation markers (`[S3]`, `[1]`), every form a model writes made
  canonical, the URLs written out in the text;
- `sentences`: sentences with their offsets (abbreviations, initials, versions, quotations,
  code and URLs never end one), the cited sentences of an artifact, a source's windows;
- `reference_list`: the entries of an article's own reference list;
- `summary`: an article's title and opening paragraph on one line each;
- `tables`: the fact check's claims table;
- `words`: the folding that lets a faithful quotation match, and one-line shortening.

No other module of `pensieve/` writes a pattern for these markers
(`tests/test_article_reader.py`).
"""

__all__ = ["blocks", "citations", "reference_list", "sentences", "summary", "tables", "words"]
