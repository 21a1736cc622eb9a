"""The studio for a newcomer: a browser without the token is told how to get in, the
new-article form refuses what a run would refuse before creating anything, a failed run's
error survives a reload, and the project page shows the estimate before a run."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import Home
from tests.studio_support import TOKEN, client, make_project

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def projects(home: Home) -> list[str]:
    folder = home.path / "workspaces" / "default" / "projects"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_browser_without_the_token_gets_a_page_saying_how_to_get_in(home: Home) -> None:
    anonymous = client(None)
    page = anonymous.get("/", headers=BROWSER)
    assert page.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    assert "pensieve studio" in page.text and "?token=" in page.text
    assert TOKEN not in page.text and "<script" not in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    # Scripts and the API keep their JSON.
    api = anonymous.get("/api/projects", headers=BROWSER)
    assert api.status_code == 401 and api.json() == {"error": "unauthorized"}
    assert anonymous.get("/").json() == {"error": "unauthorized"}


def test_the_form_refuses_a_run_without_a_model_before_creating_anything(home: Home) -> None:
    home.configure(llm={"model": None})
    c = client()
    for _attempt in range(3):  # a user retrying makes no -2, -3 ...
        started = time.monotonic()
        response = c.post("/api/projects", json={"brief": "How rainbows form", "start": True})
        assert response.status_code == 400
        error = response.json()["error"]
        assert "no model configured" in error
        assert str(home.config_path) in error and "llm.model" in error  # the file and key
        assert "Model field" in error and "--model" not in error  # the studio's own terms
        assert time.monotonic() - started < 30  # answered, not left waiting on a run
    assert projects(home) == []
    # Without starting a run, the project is made as before.
    assert c.post("/api/projects", json={"brief": "How rainbows form"}).status_code == 201
    assert projects(home) == ["how-rainbows-form"]


def test_a_failed_runs_error_stays_on_the_project_page(home: Home) -> None:
    make_project("p2", upto="refiner")
    c = client()
    assert "The last run did not finish" not in c.get("/projects/p2").text
    home.configure(llm={"model": None})  # the run refuses to start
    response = c.post("/api/projects/p2/run", json={})
    assert response.status_code == 400 and "no model configured" in response.json()["error"]
    for _reload in range(2):
        page = c.get("/projects/p2")
        assert page.status_code == 200
        assert "The last run did not finish: no model configured" in page.text


def test_the_project_page_shows_the_estimate_before_a_run(home: Home, tmp_path: Path) -> None:
    make_project("p3", upto="outliner")
    c = client()
    page = c.get("/projects/p3").text
    assert "Before you run: 7 stages" in page and "drafter" in page and "tokens" in page
    estimate = c.get("/api/projects/p3/estimate").json()
    assert estimate["stages"][0]["stage"] == "drafter"
    assert estimate["stages"][0]["system_prompt"]
    make_project("done")  # complete: nothing to estimate on its page
    assert "Before you run" not in c.get("/projects/done").text
