"""Many projects at once: batch files and the durable queue.

`items` reads a batch file (YAML, CSV, JSONL) into items with stable project ids; `queue`
runs each project as a DBOS workflow (SQLite by default, PostgreSQL for several machines),
one step per wave of stages, with worker heartbeats and recovery. DBOS is imported only
when a queue is used.
"""

__all__ = ["items", "queue"]
