"""Pensieve: researched, cited articles written by a pipeline of language-model agents."""

__version__ = "0.1.0"
