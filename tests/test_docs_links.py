"""The README and the user guide in docs/: every relative link and anchor resolves, the
README stays a short page, and every page of the guide is in the site's navigation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOPICS = (
    "commands",
    "configuration",
    "research-and-sources",
    "evidence",
    "studio",
    "batch-and-workers",
    "security",
    "benchmarks",
)

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text without code blocks and code spans (their brackets are not links)."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (mkdocs' toc makes the same for these headings)."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        name, number = base, 0
        while name in found:  # repeated headings get -1, -2 ...
            number += 1
            name = f"{base}-{number}"
        found.add(name)
    return found


def links(path: Path) -> list[str]:
    return _LINK.findall(prose(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... not ours to check
            continue
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        assert destination.exists(), f"{page.name}: {target} points at nothing"
        if anchor:
            assert destination.suffix == ".md", f"{page.name}: {target}: an anchor into a file that is not markdown"
            assert anchor in anchors(destination), f"{page.name}: {target}: no such heading in {destination.name}"


def test_the_checker_catches_a_broken_link_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## Some heading: `code`\n\nSee [b](b.md) and [x](#some-heading-code).\n")
    assert links(tmp_path / "a.md") == ["b.md", "#some-heading-code"]
    assert "some-heading-code" in anchors(tmp_path / "a.md")
    assert not (tmp_path / "b.md").exists()
    assert "missing" not in anchors(tmp_path / "a.md")


def test_the_readme_is_short_and_the_guide_has_a_page_per_topic() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(links(REPO / "README.md")) >= 10  # the checker does find the README's links
    assert len(readme.splitlines()) < 200
    for topic in TOPICS:
        assert (REPO / "docs" / f"{topic}.md").is_file(), topic
        assert f"docs/{topic}.md" in readme, f"the README does not point at docs/{topic}.md"
    # The test command's section says what Chromium and LibreOffice add and how to install them.
    assert "Chromium" in readme and "LibreOffice" in readme and "apt-get install" in readme


def test_every_page_is_in_the_sites_navigation() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = {next(iter(item.values())) for item in config["nav"]}
    assert listed == {p.name for p in (REPO / "docs").glob("*.md")}
    assert config["docs_dir"] == "docs"
