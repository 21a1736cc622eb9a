"""Event readers read typed data: `data_of` checks an event's data against its kind's
TypedDict (so mypy checks the fields a reader names), and a malformed event, live or read
back from events.jsonl, is skipped by its reader, never a KeyError or a traceback."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Union, get_args, get_origin, get_type_hints

import pytest

from pensieve.cli.progress import PlainReporter
from pensieve.project.events import DATA_OF, Event, EventKind, data_of, load_events, parse_event, well_formed


def _sample(annotation: object) -> object:
    """A value of the annotation's type; an annotation the reader cannot check fails here."""
    origin, args = get_origin(annotation), get_args(annotation)
    simple: dict[object, object] = {str: "text", int: 3, float: 1.5, bool: True, type(None): None, object: "any"}
    if annotation in simple:
        return simple[annotation]
    if origin in (Union, UnionType):
        return _sample(args[0])
    if origin is list:
        return [_sample(args[0])]
    if origin in (dict, Mapping):
        return {"key": _sample(args[1])}
    raise AssertionError(f"an annotation the event reader does not check: {annotation!r}")


@pytest.mark.parametrize("kind", list(EventKind))
def test_every_kinds_data_is_readable_typed(kind: EventKind) -> None:
    shape = DATA_OF[kind]
    sample = {name: _sample(hint) for name, hint in get_type_hints(shape).items()}
    event = Event(kind, "drafter", sample)
    assert data_of(event, kind) == sample
    other = next(k for k in EventKind if k != kind)
    assert data_of(event, other) is None  # another kind's reader never gets it


def test_malformed_data_is_refused_field_by_field() -> None:
    def tool(**data: object) -> Event:
        return Event(EventKind.TOOL, "researcher", dict(data))

    good: dict[str, object] = {
        "tool": "fetch_url",
        "arguments": "url=...",
        "duration_s": 0.2,
        "error": None,
        "result_chars": 12,
    }
    assert dict(data_of(tool(**good), EventKind.TOOL) or {}) == good
    assert data_of(tool(**{**good, "new_field": [1]}), EventKind.TOOL) is not None  # a newer writer's field
    assert data_of(tool(**{**good, "duration_s": 2}), EventKind.TOOL) is not None  # an int is a float
    missing = {k: v for k, v in good.items() if k != "tool"}
    assert data_of(tool(**missing), EventKind.TOOL) is None
    assert data_of(tool(**{**good, "result_chars": "12"}), EventKind.TOOL) is None
    assert data_of(tool(**{**good, "result_chars": True}), EventKind.TOOL) is None  # bool is not a count
    assert data_of(tool(**{**good, "error": 5}), EventKind.TOOL) is None
    # Optional fields of a total=False shape may be absent, but not of another type.
    model = {"model": "m", "purpose": "stage", "duration_s": 1.0}
    assert well_formed(model, DATA_OF[EventKind.MODEL])
    assert not well_formed({**model, "tool_calls": ["a", 2]}, DATA_OF[EventKind.MODEL])
    assert not well_formed({**model, "cost_usd": "free"}, DATA_OF[EventKind.MODEL])


def test_events_jsonl_is_read_as_events_and_bad_lines_are_skipped(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    good = {"ts": "2026-01-01T00:00:00.000Z", "kind": "note", "stage": None, "message": "hello"}
    lines = [
        json.dumps(good),
        json.dumps({**good, "kind": "no_such_kind"}),
        json.dumps({**good, "stage": 5}),
        json.dumps({"kind": "note", "message": "no time"}),
        "[1, 2]",
        json.dumps({**good, "message": 7}),  # an event, but its data is malformed
        '{"ts": "2026-01-01T00:00:01.000Z", "kind": "stage_st',  # cut short by a crash
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    events = load_events(log)
    assert [(e.kind, e.stage, e.ts) for e in events] == [(EventKind.NOTE, None, good["ts"])] * 2
    assert data_of(events[0], EventKind.NOTE) == {"message": "hello"}
    assert data_of(events[1], EventKind.NOTE) is None
    assert parse_event("note") is None
    assert load_events(tmp_path / "missing.jsonl") == []


def test_the_progress_display_shows_good_events_and_skips_malformed_ones() -> None:
    stream = io.StringIO()
    display = PlainReporter(stream)
    good = [
        Event(EventKind.STAGE_START, "drafter", {"model": "openai/x", "attempt": 1}),
        Event(EventKind.MODEL, "drafter", {"model": "m", "purpose": "stage", "duration_s": 1.0, "prompt_tokens": 7}),
        Event(EventKind.STAGE_END, "drafter", {"usage": {"prompt_tokens": 1000, "completion_tokens": 234}}),
        Event(
            EventKind.CITATION_CHECK,
            "drafter",
            {"ok": False, "problems": [], "problem_count": 2, "citations_checked": 5},
        ),
        Event(
            EventKind.EVIDENCE,
            "drafter",
            {"file": "draft.md", "summary": {"cited_sentences": 4, "supported": 3, "unsupported": 1}, "judge_calls": 0},
        ),
    ]
    malformed = [
        Event(EventKind.STAGE_START, "drafter", {}),
        Event(EventKind.STAGE_END, "drafter", {"usage": "oops"}),
        Event(EventKind.TOOL, "drafter", {"tool": "fetch_url", "arguments": 5}),
        Event(EventKind.EVIDENCE, "drafter", {"file": "draft.md", "summary": [], "judge_calls": 0}),
        Event(EventKind.RETRY, "drafter", {"error": "x", "wait_s": "soon"}),
        Event(EventKind.NOTE, None, {"message": None}),
    ]
    for event in [*good, *malformed]:
        display(event)
    shown = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert shown == [
        "drafter: started (openai/x)",
        "drafter: model call, 7 prompt + 0 completion tokens",
        "drafter: complete - 1,234 tokens",
        "citation check after drafter: 2 problem(s)",
        "evidence after drafter: 3/4 cited sentences supported, 1 unsupported",
    ]
