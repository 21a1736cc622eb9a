"""Publishing a finished article: HTML, DOCX, Markdown, JSON and the evidence bundle.

`document` reads an artifact once (citations resolved to archived sources, evidence
attached); `render` turns it into an HTML fragment every HTML output shares (the export
and the studio's Read page); `links` is the one rule for which link targets may be links;
the other modules write one format each. Nothing here
imports litellm or torch.
"""

__all__ = ["bundle", "document", "export", "links", "render"]
