"""Topic memory: the workspace's library of topic files and its semantic index.

Importing this package (or `library`, `chunking`, `capture`) must stay cheap: only
`embedder` touches torch and sentence-transformers, and only when a search needs vectors.
"""

__all__ = ["capture", "embedder", "index", "library", "search"]
