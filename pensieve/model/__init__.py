"""The model: the one seam to litellm and what a stage needs around it.

`llm` is the only importer of litellm (lazily, so read-only commands never load it) and
holds the retry policy and the per-provider call gate; `client` binds it to one stage (model,
temperature, budget, events); `textcalls` reads tool calls that small models write as text.
"""

__all__ = ["client", "llm", "textcalls"]
