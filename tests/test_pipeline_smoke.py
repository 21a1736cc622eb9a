from __future__ import annotations

import json

from pensieve.stages import STAGES
from tests.conftest import Home


def test_full_run_produces_every_artifact(home: Home) -> None:
    pid = home.new()
    result = home.run("run", pid)
    assert result.exit_code == 0, result.stderr
    project = home.project_dir(pid)
    for stage in STAGES:
        assert (project / stage.writes).is_file(), stage.writes
    status = json.loads((project / "status.json").read_text())
    assert status["status"] == "complete"
    assert all(s["status"] == "complete" for s in status["stages"].values())
