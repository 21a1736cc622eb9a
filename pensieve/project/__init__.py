"""A project on disk: the files every other layer reads and writes.

`workspace` is the only way anything is written (atomic writes, locks, confined paths);
`status` is status.json's model and `status_view` its cheap read for listings; `events`
the run's event stream and events.jsonl; `listing` finds and summarises projects;
`source_archive` keeps every fetched page; `staleness` says which stages' inputs changed.
Nothing here imports the layers above it.
"""

__all__ = ["events", "listing", "source_archive", "staleness", "status", "status_view", "workspace"]
