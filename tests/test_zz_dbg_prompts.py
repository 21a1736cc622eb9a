from tests.conftest import Home
from tests.fakes import artifacts
from tests.fakes.model_server import call
def test_dbg(home: Home) -> None:
    pid = home.new()
    assert home.run("run", pid).exit_code == 0
    project = home.project_dir(pid)
    (project / "draft_v1.md").write_text("# My hand-edited draft\n")
    new_draft = artifacts.article("A new draft about vector databases")
    home.model.script("drafter", call("write_project_file", {"filename": "draft_v1.md", "content": new_draft}))
    result = home.run("run", pid, "--stage", "drafter")
    for r in home.model.for_stage("drafter"):
        print("----", r.messages[-1]["content"][:600] if r.messages[-1].get("content") else r.messages[-1])
    print(result.stderr[-2000:])
