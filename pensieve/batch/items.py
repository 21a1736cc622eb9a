"""The items of a batch file (YAML, CSV or JSONL) and the projects they become.

The whole file is read and checked before anything is created: a missing brief, a
duplicate id, an unknown or repeated column or key, a JSONL line that is not an object, or a
file that is not YAML/CSV/JSONL is refused with one line naming the line of the file. Each
item's project id is stable (its `id`, else a slug of the brief and a hash of it), so the
same file again creates nothing twice.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pensieve.errors import UsageError, shown_name
from pensieve.hashing import sha256_of_bytes
from pensieve.project.workspace import BRIEF_FILE, Project, Workspace, check_name, slugify

FIELDS = ("brief", "id", "target_words", "audience", "model", "sources")
FORMATS = {".yaml": "yaml", ".yml": "yaml", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
MIN_TARGET_WORDS = 100  # article.target_words' floor


@dataclass(frozen=True)
class BatchItem:
    line: int
    project_id: str
    brief: str
    target_words: int | None = None
    audience: str | None = None
    model: str | None = None
    explicit_id: bool = False
    # The item's reading list: paths (relative to the batch file) or URLs, added to the
    # workspace library and archived before research (as `pensieve new --source`).
    sources: tuple[str, ...] = ()

    def overrides(self) -> dict[str, Any]:
        """What the item sets for its project's runs (the workflow's input)."""
        return {"target_words": self.target_words, "audience": self.audience, "model": self.model}


def stable_id(brief: str) -> str:
    """A project id from the brief alone: the same brief always gets the same id."""
    first = next((line for line in brief.splitlines() if line.strip()), brief)
    return f"{slugify(first, max_len=40)}-{sha256_of_bytes(brief.strip().encode('utf-8'))[:8]}"


def _records(path: Path, text: str) -> list[tuple[int, Any]]:
    """(line, raw item) for every item of the file, in order."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise UsageError(f"{path}: not a YAML, CSV or JSONL file (name it .yaml, .yml, .csv or .jsonl)")
    if kind == "jsonl":
        return _jsonl_records(path, text)
    if kind == "csv":
        return _csv_records(path, text)
    return _yaml_records(path, text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object_pairs_hook: a repeated key is refused, not silently the last."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice")
        seen[key] = value
    return seen


def _jsonl_records(path: Path, text: str) -> list[tuple[int, Any]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not a JSON object ({exc.msg}); write one JSON object a line") from None
        except ValueError as exc:  # from _unique_keys
            raise UsageError(f"{path}:{number}: {exc}; give each field once") from None
        # A bare string would pass for a brief (as in a YAML list of briefs): a JSONL line
        # that is not an object is a mistake (a stray line, a quoted CSV row), so refused.
        if not isinstance(value, dict):
            raise UsageError(
                f"{path}:{number}: not a JSON object (a JSON {type(value).__name__}); "
                'write one JSON object a line, such as {"brief": "..."}'
            )
        found.append((number, value))
    return found


def _csv_records(path: Path, text: str) -> list[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
        unknown = [name for name in header if name not in FIELDS]
        if unknown:
            raise UsageError(f"{path}:1: unknown column {unknown[0]!r}; columns are: {', '.join(FIELDS)}")
        # DictReader keeps the last of two columns of one name: the first would be lost.
        repeated = next((name for i, name in enumerate(header) if name in header[:i]), None)
        if repeated is not None:
            raise UsageError(f"{path}:1: column {repeated!r} appears twice; give each column once")
        found = []
        for row in reader:
            if None in row:  # more cells than the header has columns
                raise UsageError(f"{path}:{reader.line_num}: more cells than the header has columns")
            found.append((reader.line_num, {k: v for k, v in row.items() if v not in (None, "")}))
        return found
    except csv.Error as exc:
        raise UsageError(f"{path}:{reader.line_num}: bad CSV ({exc})") from None


def _check_keys(path: Path, node: Any) -> None:
    """A YAML mapping with a key given twice is refused (safe_load keeps only the last)."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return
    seen: set[Any] = set()
    for key, _value in node.value:
        if isinstance(key, yaml.ScalarNode):
            if key.value in seen:
                raise UsageError(
                    f"{path}:{key.start_mark.line + 1}: key {key.value!r} appears twice in one item; give it once"
                )
            seen.add(key.value)


def _yaml_error(path: Path, exc: Exception) -> UsageError:
    """PyYAML's error (several lines, with a caret) as one line naming the file's line."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{mark.line + 1}" if mark is not None else "1"
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    return UsageError(f"{path}:{where}: bad YAML: {problem}")


MAX_FLOW_DEPTH = 64  # [ and { nested deeper than this are no batch item


def _flow_depth(text: str) -> int:
    """The deepest nesting of [ and { in the text (quotes ignored: an over-count only)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest


def _refuse_aliases(path: Path, text: str) -> None:
    """A batch file holds no YAML alias (`*name`): a few hundred bytes of nested aliases
    expand to 10^9 values when read; an item's fields are written out instead."""
    import yaml

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1 if event.start_mark else 1
            raise UsageError(
                f"{path}:{line}: YAML alias *{event.anchor} in a batch file; "
                "write each value out (anchors and aliases are not accepted)"
            )


def _yaml_records(path: Path, text: str) -> list[tuple[int, Any]]:
    import yaml

    if _flow_depth(text) > MAX_FLOW_DEPTH:  # PyYAML's scanner takes minutes on deep nesting
        raise RecursionError
    try:
        _refuse_aliases(path, text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None
    if root is None:
        return []
    if isinstance(root, yaml.MappingNode):  # `items: [...]`
        nodes = {key.value: value for key, value in root.value if isinstance(key, yaml.ScalarNode)}
        if set(nodes) != {"items"} or len(root.value) != 1:
            raise UsageError(f"{path}:1: a batch file is a list of items (or `items:` and the list)")
        root = nodes["items"]
    if not isinstance(root, yaml.SequenceNode):
        raise UsageError(f"{path}:{root.start_mark.line + 1}: a batch file is a list of items, each with a brief")
    found = []
    for node in root.value:
        _check_keys(path, node)
        try:  # a tag such as !!python/object has no safe constructor: one line, as bad YAML
            found.append((node.start_mark.line + 1, yaml.safe_load(yaml.serialize(node))))
        except yaml.YAMLError as exc:
            raise _yaml_error(path, exc) from None
    return found


def _item(path: Path, line: int, raw: Any) -> BatchItem:
    where = f"{path}:{line}"
    if isinstance(raw, str):
        raw = {"brief": raw}  # a YAML list of plain briefs
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: an item must be a mapping with a brief (got {type(raw).__name__})")
    unknown = [str(key) for key in raw if key not in FIELDS]
    if unknown:
        raise UsageError(f"{where}: unknown field {unknown[0]!r}; fields are: {', '.join(FIELDS)}")
    brief = raw.get("brief")
    if not isinstance(brief, str) or not brief.strip():
        raise UsageError(f"{where}: missing brief; every item needs a brief (what the article is about)")
    from pensieve.project.listing import validate_brief

    try:
        text = validate_brief(brief)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    given = raw.get("id")
    if given is not None:
        # Checked before any conversion: str() of a huge structure is itself the attack.
        if not isinstance(given, str | int) or isinstance(given, bool):
            raise UsageError(f"{where}: id must be text, such as vector-db-intro (got {type(given).__name__})")
        given = str(given).strip()
        try:
            check_name("project id", given)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
    target = raw.get("target_words")
    if target is not None:
        if not isinstance(target, str | int) or isinstance(target, bool) or len(str(target)) > 12:
            raise UsageError(f"{where}: target_words must be a whole number such as 1200")
        try:
            target = int(str(target).strip())
        except ValueError:
            raise UsageError(f"{where}: target_words must be a whole number, got {target!r}") from None
        if target < MIN_TARGET_WORDS:
            raise UsageError(f"{where}: target_words must be at least {MIN_TARGET_WORDS}, got {target}")
    audience = raw.get("audience")
    if audience is not None and (not isinstance(audience, str) or not audience.strip()):
        raise UsageError(f"{where}: audience must be text")
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise UsageError(f"{where}: model must be a litellm model string such as openai/gpt-4o-mini")
    sources = _sources(where, path, raw.get("sources"))
    return BatchItem(
        line=line,
        sources=sources,
        project_id=given or stable_id(text),
        brief=text,
        target_words=target,
        audience=audience.strip() if isinstance(audience, str) else None,
        model=model.strip() if isinstance(model, str) else None,
        explicit_id=given is not None,
    )


def _sources(where: str, path: Path, value: Any) -> tuple[str, ...]:
    """A list of paths or URLs (in CSV one cell, separated by ';'); paths relative to the file."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [v for v in value.split(";") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UsageError(f"{where}: sources must be a list of file paths or URLs")
    from pensieve.library.adding import is_url

    out = []
    for item in (v.strip() for v in value):
        out.append(item if is_url(item) else str((path.parent / Path(item).expanduser()).resolve()))
    return tuple(dict.fromkeys(out))


def add_sources(workspace: Workspace, path: Path, items: list[BatchItem], settings: Any) -> dict[str, tuple[str, ...]]:
    """Every item's sources added to the workspace library: project id -> reading list
    (library ids). A source that cannot be added refuses the batch, naming its line."""
    if not any(item.sources for item in items):
        return {}
    from pensieve.library.adding import add_anything
    from pensieve.library.store import Library

    library = Library(workspace)
    reading: dict[str, tuple[str, ...]] = {}
    for item in items:
        if not item.sources:
            continue
        outcomes = add_anything(library, item.sources, settings)
        refused = next((o for o in outcomes if o.document is None), None)
        if refused is not None:
            raise UsageError(f"{path}:{item.line}: source {refused.line}")
        reading[item.project_id] = tuple(dict.fromkeys(o.document.id for o in outcomes if o.document is not None))
    return reading


def _read_regular(path: Path) -> bytes:
    """The batch file's bytes; a FIFO, a device or a directory is refused, never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read batch file {shown_name(str(path))}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{path}: not a regular file (a pipe, device or directory); give a YAML, CSV or JSONL file")
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read batch file {path}: {exc.strerror}") from None


def read_items(path: Path) -> list[BatchItem]:
    """Every item of the file, checked; raises UsageError naming the first bad line."""
    data = _read_regular(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    try:
        items = [_item(path, line, raw) for line, raw in _records(path, text)]
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply to be a batch file; each item is a flat set of fields") from None
    if not items:
        raise UsageError(f"{path}: no items; give one brief per item")
    seen: dict[str, int] = {}
    for item in items:
        if item.project_id in seen:
            what = f"id {item.project_id!r}" if item.explicit_id else "brief"
            raise UsageError(
                f"{path}:{item.line}: duplicate {what} (also on line {seen[item.project_id]}); "
                "give each item its own id"
            )
        seen[item.project_id] = item.line
    return items


def check_existing(workspace: Workspace, path: Path, items: list[BatchItem]) -> None:
    """A project that already exists under an item's id must have that item's brief."""
    for item in items:
        project = workspace.project(item.project_id)
        brief_file = project.dir / BRIEF_FILE
        if project.dir.exists() and brief_file.is_file():
            if project.read_brief().strip() != item.brief.strip():
                raise UsageError(
                    f"{path}:{item.line}: project {item.project_id!r} already exists with another brief; "
                    "give this item another id"
                )
        elif project.dir.exists():
            raise UsageError(f"{path}:{item.line}: {project.dir} exists but is not a project; give another id")


def create_projects(
    workspace: Workspace, items: list[BatchItem], reading: dict[str, tuple[str, ...]] | None = None
) -> tuple[list[Project], int]:
    """Each item's project, created if missing, with its reading list (`add_sources`);
    returns them and how many were created."""
    from pensieve.library.sources import load_plan, save_plan
    from pensieve.project.listing import new_project

    projects, created = [], 0
    for item in items:
        project = workspace.project(item.project_id)
        if not project.status_path.is_file():
            project = new_project(workspace, item.brief, item.project_id)
            created += 1
        wanted = (reading or {}).get(item.project_id, ())
        plan = load_plan(project.dir)
        if wanted and plan.reading_list != wanted:
            save_plan(project.dir, replace(plan, reading_list=wanted))
        projects.append(project)
    return projects, created
