"""The workspace library: a writer's own documents (PDF, Word, HTML, Markdown, text, pages
fetched once by URL), searched and cited by the agents like the web.

- `extract`: text, a page or heading map and metadata from a file's bytes (pypdf,
  python-docx, trafilatura), with the limits of `library.*`; a refusal is one line.
- `isolation`: a PDF read by a child process with memory, CPU and time limits, so a
  crash or a hang in PDFium refuses the file instead of ending the command.
- `store`: `workspaces/<ws>/library/`, one directory per document named by its content
  hash, written whole or not at all, and its catalog.
- `chunks`: passages of a document with the page each starts on.
- `index`: the incremental search index (MiniLM vectors of topic memory + BM25) and the
  hybrid search.
- `sources`: a library document archived in a project as a source [Sn] with its page map;
  a project's reading list.

Importing this package stays cheap: pypdf, python-docx, bm25s and the model are imported
by the functions that need them.
"""

__all__ = ["adding", "extract", "index", "isolation", "sources", "store"]
