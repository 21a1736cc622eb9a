"""Running a project: the stages of one `pensieve run`, whoever asked for it.

`pipeline` schedules the stage rows and commits their artifacts (the CLI, the batch worker
and the studio's child runs all enter through `pipeline.run_project`); `preflight` refuses a
run that cannot start; `agent` runs one stage's conversation, `dispatch` its tool calls,
`context` keeps it inside the model's window, `finishing` decides whether the stage made a
real artifact and `commit` writes it crash-safely; `findings` sends a checker's findings to
the stage that owns the artifact.
"""

__all__ = ["agent", "commit", "dispatch", "findings", "finishing", "pipeline", "preflight"]
