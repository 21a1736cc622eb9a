"""The fake model's vocabulary for misbehaving models, checked on the wire.

Each helper is sent through a raw HTTP POST, so what is asserted is exactly what a client
(litellm included) receives. One test then checks that `finish_reason` reaches Pensieve's
own reply object through litellm.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from pensieve.model import llm
from pensieve.model.textcalls import parse_text_tool_calls
from tests.fakes.model_server import (
    TEXT_CALL_FORMS,
    FakeModel,
    call,
    cut_off,
    echo,
    text,
    text_call,
    text_calls,
    think,
    write,
)

SYSTEM = "You are the outliner, one stage (`outline`) of the pipeline. Write outline.md."
TASK = "Project: p-1. Your stage: outline (Outline).\nRead: topic_brief.md."
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("read_project_file", "write_project_file")
]
ARGUMENTS = {"filename": "outline.md", "content": "# Outline\n\n## One {a}\n\n## Two [S1]\n"}


def post(fake: FakeModel) -> dict[str, Any]:
    body = {
        "model": "fake",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}],
        "tools": TOOLS,
    }
    request = urllib.request.Request(
        f"{fake.base_url}/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        choice: dict[str, Any] = json.load(response)["choices"][0]
    return choice


def answer(fake: FakeModel, reply: dict[str, Any]) -> dict[str, Any]:
    fake.script("outline", reply)
    return post(fake)


@pytest.mark.parametrize("form", TEXT_CALL_FORMS)
def test_text_call_sends_the_call_as_content_in_each_form(fake_model: FakeModel, form: str) -> None:
    choice = answer(fake_model, text_call("write_project_file", ARGUMENTS, form=form, prose="Writing it now."))
    assert choice["finish_reason"] == "stop"
    assert "tool_calls" not in choice["message"]
    content = choice["message"]["content"]
    assert content.startswith("Writing it now.\n\n")
    calls, rest = parse_text_tool_calls(content, ["write_project_file"], ["write_project_file", "web_search"])
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("write_project_file", ARGUMENTS)]
    assert rest == "Writing it now."


def test_text_call_forms_look_like_what_models_write(fake_model: FakeModel) -> None:
    def content(form: str) -> str:
        return str(answer(fake_model, text_call("text_stats", {"filename": "a.md"}, form=form))["message"]["content"])

    assert content("bare") == '{"name": "text_stats", "arguments": {"filename": "a.md"}}'
    assert content("fenced").startswith("```json\n{\n") and content("fenced").endswith("\n```")
    assert content("tagged") == '<tool_call>\n{"name": "text_stats", "arguments": {"filename": "a.md"}}\n</tool_call>'
    assert json.loads(content("list")) == [{"name": "text_stats", "arguments": {"filename": "a.md"}}]
    assert json.loads(content("parameters")) == {"name": "text_stats", "parameters": {"filename": "a.md"}}
    assert json.loads(content("string")) == {"name": "text_stats", "arguments": '{"filename": "a.md"}'}
    function = {"type": "function", "function": {"name": "text_stats", "arguments": '{"filename": "a.md"}'}}
    assert json.loads(content("function")) == function
    raw = str(answer(fake_model, text_call("write_project_file", ARGUMENTS, form="unescaped"))["message"]["content"])
    assert "# Outline\n\n## One" in raw  # real line breaks inside the JSON string
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    with pytest.raises(ValueError, match="unknown text_call form"):
        text_call("text_stats", {}, form="yaml")


def test_text_calls_sends_several(fake_model: FakeModel) -> None:
    reply = text_calls(("read_project_file", {"filename": "topic_brief.md"}), ("text_stats", {}), form="list")
    content = answer(fake_model, reply)["message"]["content"]
    assert [item["name"] for item in json.loads(content)] == ["read_project_file", "text_stats"]


def test_cut_off_reports_the_length_limit(fake_model: FakeModel) -> None:
    choice = answer(fake_model, cut_off("# Draft\n\nThe first section goes on and"))
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "# Draft\n\nThe first section goes on and"
    # A tool call cut off mid-way, written as text.
    half = text_call("write_project_file", ARGUMENTS)["text"][:60]
    choice = answer(fake_model, cut_off(half))
    assert (choice["finish_reason"], choice["message"]["content"]) == ("length", half)


def test_any_reply_may_set_its_finish_reason(fake_model: FakeModel) -> None:
    assert answer(fake_model, {**text("filtered"), "finish_reason": "content_filter"})["finish_reason"] == (
        "content_filter"
    )
    choice = answer(fake_model, {**write("outline.md", "# Outl"), "finish_reason": "length"})
    assert choice["finish_reason"] == "length"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "write_project_file"
    # The defaults are unchanged.
    assert answer(fake_model, call("text_stats", {"filename": "a.md"}))["finish_reason"] == "tool_calls"
    assert answer(fake_model, text("done"))["finish_reason"] == "stop"


def test_echo_replies_with_the_request_own_prompt(fake_model: FakeModel) -> None:
    assert answer(fake_model, echo())["message"]["content"] == TASK
    assert answer(fake_model, echo("system"))["message"]["content"] == SYSTEM
    assert answer(fake_model, echo("both"))["message"]["content"] == f"{SYSTEM}\n\n{TASK}"
    choice = answer(fake_model, echo("task", into="outline.md"))
    assert choice["finish_reason"] == "tool_calls"
    (written,) = choice["message"]["tool_calls"]
    assert written["function"]["name"] == "write_project_file"
    assert json.loads(written["function"]["arguments"]) == {"filename": "outline.md", "content": TASK}
    with pytest.raises(ValueError, match="echo"):
        echo("user")


def test_think_prefixes_a_think_block(fake_model: FakeModel) -> None:
    content = answer(fake_model, think("The user wants an outline.", "# Outline"))["message"]["content"]
    assert content == "<think>\nThe user wants an outline.\n</think>\n\n# Outline\n"


def test_always_cycles_once_the_script_is_used_up(fake_model: FakeModel) -> None:
    fake_model.script("outline", text("scripted"))
    fake_model.always("outline", text("one"), call("read_project_file", {"filename": "topic_brief.md"}))
    replies = [post(fake_model) for _ in range(4)]
    assert [r["message"]["content"] for r in replies] == ["scripted", "one", None, "one"]
    assert replies[2]["message"]["tool_calls"][0]["function"]["name"] == "read_project_file"
    assert fake_model.count("outline") == 4


async def test_finish_reason_reaches_the_llm_reply(fake_model: FakeModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-finish-reason")
    fake_model.script("outline", cut_off("# Outline\n\n## One"), text("done"), write("outline.md", "# O"))
    reasons = []
    for _ in range(3):
        reply = await llm.complete(
            model="openai/gpt-4o-mini",
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}],
            tools=TOOLS,
            api_base=fake_model.base_url,
            policy=llm.RetryPolicy(retries=0),
        )
        reasons.append(reply.finish_reason)
    assert reasons == ["length", "stop", "tool_calls"]
