"""The studio: a local web app over the same files the CLI reads and writes.

`security` (token, Host, Origin, CSP, body cap) guards every request; `app` serves the pages
and `api` the JSON API and event streams; `projects` reads and edits a project's files;
`runs` starts `pensieve run` processes and follows their events; `queue` shows the batch
queue (DBOS imported on request); `render` turns markdown into the pages' HTML.
"""

__all__ = ["app", "runs", "security", "server"]
