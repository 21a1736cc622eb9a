"""Claim-level evidence: every cited sentence of the drafts and the final article aligned
with the passages of its cited sources that best support it.

- `segment`: cited sentences of an artifact, sentence windows of a source (offsets kept),
  as the article reader (`pensieve.article.sentences`) reads them;
- `lexical`: the numbers, dates, quantities and named entities a sentence asserts;
- `align`: MiniLM similarity plus the lexical evidence -> a verdict per (sentence, source);
- `elsewhere`: a doubtful citation another source of the project says much more closely;
- `vectors`: source window vectors cached per content hash (re-checking embeds nothing);
- `store`: evidence.json (read without numpy or torch: `list` and `status` use it);
- `schema`: the shape of its entries, as typed dicts for their readers;
- `judge`: the optional model judge for weak and unsupported pairs;
- `hooks`: how the pipeline and the CLI run all this for a project;
- `lost_facts`: the sourced sentences of one version whose facts the next no longer says.
"""

__all__ = ["hooks", "judge", "lost_facts", "schema", "segment", "store"]
