"""Supply chain: exact pins, a hash-locked tree, the malicious litellm releases excluded,
and no unexpected start-up (.pth) files in the environment's site-packages."""

from __future__ import annotations

import ast
import re
import site
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MALICIOUS_LITELLM = ("1.82.7", "1.82.8", "1.107.0")
LITELLM_PIN = "1.106.2"

_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")


def _name(value: str) -> str:
    return re.sub(r"[-_.]+", "-", value).lower()


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) from requirements.lock."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in (REPO / "requirements.lock").read_text().splitlines():
        match = _REQ.match(line)
        if match:
            current = _name(match.group(1))
            entries[current] = (match.group(3), [])
        elif current and "--hash=sha256:" in line:
            entries[current][1].append(line.split("--hash=sha256:", 1)[1].split()[0])
        elif line and not line.startswith((" ", "#")):
            current = None
    return entries


def test_every_direct_dependency_is_pinned_exactly() -> None:
    project = pyproject()["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    for requirement in requirements:
        assert _REQ.match(requirement), f"not pinned exactly: {requirement}"
    litellm = next(r for r in project["dependencies"] if _name(r.split("[")[0].split("=")[0]) == "litellm")
    assert litellm.endswith(f"=={LITELLM_PIN}")
    assert LITELLM_PIN not in MALICIOUS_LITELLM


def test_the_studio_declares_every_package_it_imports() -> None:
    """The issue's rule for the studio: declare what you use, even what litellm brings."""
    declared = {_name(r.split("[")[0].split("=")[0]) for r in pyproject()["project"]["dependencies"]}
    distributions = metadata.packages_distributions()
    studio = [*(REPO / "pensieve" / "studio").rglob("*.py"), REPO / "pensieve" / "cli" / "studio.py"]
    for path in studio:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {"pensieve"}:
                packages = {_name(d) for d in distributions.get(top, [top])}
                assert packages & declared, f"{path.name} imports {top}, which pyproject.toml does not declare"


def test_the_lock_pins_the_whole_tree_with_hashes() -> None:
    entries = locked()
    assert len(entries) > 50
    for name, (version, hashes) in entries.items():
        assert hashes, f"{name}=={version} has no hash"
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes)
    # Every direct dependency is in the lock at the version pyproject pins.
    project = pyproject()["project"]
    # The docs extra (mkdocs, to build the user guide as a site) is optional and never
    # installed by CI: pinned exactly (above), but not part of the locked tree.
    extras = [r for name, extra in project["optional-dependencies"].items() if name != "docs" for r in extra]
    direct = list(project["dependencies"]) + extras
    for requirement in direct:
        match = _REQ.match(requirement)
        assert match
        name, version = _name(match.group(1)), match.group(3)
        assert name in entries, f"{name} missing from requirements.lock"
        assert entries[name][0].split("+")[0] == version, (name, entries[name][0], version)
    # The one documented exception: torch's CPU build, hashed from the local wheel.
    assert entries["torch"][0] == "2.13.0+cpu"
    header = (REPO / "requirements.lock").read_text().split("\naiohappyeyeballs", 1)[0]
    assert "Documented exception: torch" in header


def test_the_malicious_litellm_releases_can_never_be_installed() -> None:
    assert locked()["litellm"][0] == LITELLM_PIN
    lock_text = (REPO / "requirements.lock").read_text()
    for bad in MALICIOUS_LITELLM:
        assert f"litellm=={bad}" not in lock_text
    constraints = (REPO / "constraints.txt").read_text()
    line = next(line for line in constraints.splitlines() if line.startswith("litellm"))
    for bad in MALICIOUS_LITELLM:
        assert f"!={bad}" in line
    ci = (REPO / ".ci" / "run").read_text()
    assert "--require-hashes -c constraints.txt -r requirements.lock" in ci
    assert "--no-deps" in ci
    # And what is installed here is the pin.
    assert metadata.version("litellm") == LITELLM_PIN


# Start-up files that are expected in site-packages. Anything else runs code at every
# interpreter start (the trick of the malicious litellm 1.82.8) and fails this test.
ALLOWED_PTH = (
    re.compile(r"distutils-precedence\.pth"),  # setuptools
    re.compile(r"__editable__\.pensieve-[\w.]+\.pth"),  # `pip install -e .` of this project
    re.compile(r"_virtualenv\.pth"),  # virtualenv's own
)


def test_no_unexpected_pth_startup_files() -> None:
    directories = {Path(p) for p in site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        directories.add(Path(site.getusersitepackages()))
    assert directories, "no site-packages found"
    found = [path for directory in directories if directory.is_dir() for path in directory.glob("*.pth")]
    unexpected = [p for p in found if not any(pattern.fullmatch(p.name) for pattern in ALLOWED_PTH)]
    assert not unexpected, f"unexpected start-up files in site-packages: {unexpected}"
    # Our own editable .pth, if present, only installs the finder for this project.
    for path in found:
        if path.name.startswith("__editable__.pensieve"):
            content = path.read_text()
            assert content.startswith(("import __editable___pensieve", "/")), content
    assert sys.prefix  # the environment under test is the one running pytest
