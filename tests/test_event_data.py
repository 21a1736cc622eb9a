"""Every kind of event says what data it carries, and emitters are held to it by mypy
(one typed overload of EventSink.emit per kind, from its TypedDict in DATA_OF)."""

from __future__ import annotations

import typing

from pensieve.project.events import DATA_OF, Event, EventBus, EventKind, EventSink, ModelCall


def test_every_kind_has_its_data_and_its_overload() -> None:
    assert set(DATA_OF) == set(EventKind)
    typed = {}
    for overload in typing.get_overloads(EventSink.emit):
        hints = typing.get_type_hints(overload)
        (kind,) = typing.get_args(hints["kind"])
        (data,) = typing.get_args(hints["data"])
        typed[kind] = data
    assert typed == DATA_OF


def test_the_data_reaches_subscribers_as_given() -> None:
    seen: list[Event] = []
    bus = EventBus(seen.append)
    call = ModelCall(model="m", purpose="agent", duration_s=0.5, prompt_tokens=3)
    bus.emit(EventKind.MODEL, "drafter", **call)
    (event,) = seen
    assert (event.kind, event.stage, event.data) == (EventKind.MODEL, "drafter", dict(call))
