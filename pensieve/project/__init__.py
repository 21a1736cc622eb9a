"""A project on disk: the files every other layer reads and writes.

`workspace` is the only way anything is written (atomic writes, locks, confined paths);
`status` is status.json's model and `status_view` its cheap read for listings; `events`
the run's event stream and events.jsonl; `run_outcome` how a run process ended (its
last event, which the studio reads); `listing` finds and summarises projects;
`source_archive` keeps every fetched page; `index_file` a one-file search index's
update lock and cache (the topic and library indexes); `staleness` says which stages'
inputs changed.
Nothing here imports the layers above it.
"""

__all__ = [
    "events",
    "index_file",
    "listing",
    "run_outcome",
    "source_archive",
    "staleness",
    "status",
    "status_view",
    "workspace",
]
