"""Tool calls written as text: every form seen from small models, and no false positives.

The first samples are verbatim replies of Qwen2.5-Coder-0.5B-Instruct served by llama.cpp
(`shared/tools/local-model.sh serve qwen`) to a request offering read_project_file and
write_project_file.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pensieve.model.textcalls import parse_text_tool_calls
from pensieve.tools import TOOL_NAMES

KNOWN = TOOL_NAMES
OFFERED = ("read_project_file", "write_project_file", "text_stats")


def parse(text: str) -> tuple[list[tuple[str, object]], str]:
    calls, rest = parse_text_tool_calls(text, OFFERED, KNOWN)
    return [(c.name, json.loads(c.arguments)) for c in calls], rest


# --- verbatim samples from Qwen2.5-Coder-0.5B behind llama.cpp ---------------------------


def test_qwen_bare_object_with_indentation() -> None:
    text = '{\n  "name": "read_project_file",\n  "arguments": {\n    "filename": "topic_brief.md"\n  }\n}'
    assert parse(text) == ([("read_project_file", {"filename": "topic_brief.md"})], "")


def test_qwen_one_object_per_line() -> None:
    text = (
        '{"name": "write_project_file", "arguments": {"filename": "vector_databases.md"}}\n'
        '{"name": "read_project_file", "arguments": {"filename": "vector_databases.md"}}'
    )
    calls, rest = parse(text)
    assert calls == [
        ("write_project_file", {"filename": "vector_databases.md"}),
        ("read_project_file", {"filename": "vector_databases.md"}),
    ]
    assert rest == ""


def test_qwen_fenced_call_with_a_title_cased_name() -> None:
    text = (
        '```json\n{\n  "name": "Write Project File",\n  "arguments": {\n    "filename": "outline.md",\n'
        '    "content": "In this section, we will write a file."\n  }\n}\n```'
    )
    assert parse(text) == (
        [("write_project_file", {"filename": "outline.md", "content": "In this section, we will write a file."})],
        "",
    )


def test_qwen_echo_of_the_tool_schemas_is_not_a_call() -> None:
    text = (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "write_project_file", "description": "Write a file in the '
        'project directory.", "parameters": {"type": "object", "properties": {"filename": {"type": "string"}, '
        '"content": {"type": "string"}}, "required": ["filename", "content"]}}}\n'
        '{"type": "function", "function": {"name": "read_project_file", "description": "Read a file in the '
        'project directory.", "parameters": {"type": "object", "properties": {"filename": {"type": "string"}}, '
        '"required": ["filename"]}}}\n</tools>\n\nFor each function call, return a json object with function '
        'name and arguments within (jsonObject)\n\n{"name": <function-name>, "arguments": <args-json-object'
    )
    assert parse_text_tool_calls(text, OFFERED, KNOWN) == ([], text)


def test_qwen_invented_name_is_not_a_call() -> None:
    text = '<outline.md>\n{"name": "Read topic_brief.md", "arguments": {"filename": "topic_brief.md"}}'
    assert parse_text_tool_calls(text, OFFERED, KNOWN) == ([], text)


# --- the other forms ------------------------------------------------------------------------

ARTICLE = '# Title\n\n## Intro {with braces}\nLine two with a "quote" and [S1].\n\n```python\nx = {}\n```\n'
WRITE = {"filename": "outline.md", "content": ARTICLE}


def test_tagged_calls_with_prose_around() -> None:
    text = (
        "I will write the outline now.\n<tool_call>\n"
        + json.dumps({"name": "write_project_file", "arguments": WRITE})
        + "\n</tool_call>\n<tool_call>\n"
        + json.dumps({"name": "text_stats", "arguments": {"filename": "outline.md"}})
        + "\n</tool_call>\nDone."
    )
    calls, rest = parse(text)
    assert calls == [("write_project_file", WRITE), ("text_stats", {"filename": "outline.md"})]
    assert rest == "I will write the outline now.\n\nDone."


def test_unterminated_tag_and_fence() -> None:
    call = json.dumps({"name": "text_stats", "arguments": {"filename": "draft_v1.md"}})
    assert parse(f"<tool_call>\n{call}") == ([("text_stats", {"filename": "draft_v1.md"})], "")
    assert parse(f"Here:\n```\n{call}\n") == ([("text_stats", {"filename": "draft_v1.md"})], "Here:")


def test_a_list_of_calls_in_any_fence() -> None:
    items = [
        {"name": "write_project_file", "parameters": WRITE},
        {"type": "function", "function": {"name": "text_stats", "arguments": '{"filename": "outline.md"}'}},
    ]
    text = f"Calls:\n```tool_code\n{json.dumps(items, indent=2)}\n```\nThat is all."
    calls, rest = parse(text)
    assert calls == [("write_project_file", WRITE), ("text_stats", {"filename": "outline.md"})]
    assert rest == "Calls:\n\nThat is all."


def test_arguments_as_a_json_string_and_openai_envelopes() -> None:
    as_string = {"name": "write_project_file", "arguments": json.dumps(WRITE)}
    assert parse(json.dumps(as_string))[0] == [("write_project_file", WRITE)]
    envelope = {"tool_calls": [{"id": "x", "type": "function", "function": {"name": "list_projects"}}]}
    assert parse(json.dumps(envelope))[0] == [("list_projects", {})]
    prefixed = {"name": "functions.read_project_file", "arguments": {"filename": "a.md"}}
    assert parse("[TOOL_CALLS]" + json.dumps([prefixed])) == ([("read_project_file", {"filename": "a.md"})], "")


def test_raw_newlines_and_bad_escapes_inside_strings() -> None:
    # What small models write: real line breaks and tabs inside the content string, and \'.
    text = (
        '{"name": "write_project_file", "arguments": {"filename": "outline.md", "content": '
        '"# Outline\n\n## It\\\'s {braced}\n\tindented \\_ and \\\\ kept"}}\nSummary: wrote it.'
    )
    calls, rest = parse(text)
    assert calls == [
        (
            "write_project_file",
            {"filename": "outline.md", "content": "# Outline\n\n## It's {braced}\n\tindented \\_ and \\ kept"},
        )
    ]
    assert rest == "Summary: wrote it."


def test_a_known_tool_not_offered_is_still_returned_for_the_dispatcher_to_refuse() -> None:
    calls, _ = parse_text_tool_calls('{"name": "web_search", "arguments": {"query": "hnsw"}}', OFFERED, KNOWN)
    assert [(c.name, c.arguments) for c in calls] == [("web_search", '{"query": "hnsw"}')]


def test_invalid_arguments_are_passed_on_as_written() -> None:
    calls, _ = parse_text_tool_calls('{"name": "text_stats", "arguments": "filename=outline.md"}', OFFERED, KNOWN)
    assert calls[0].arguments == "filename=outline.md"  # the dispatcher says it is not JSON


def test_ids_are_deterministic_and_duplicates_collapse() -> None:
    one = json.dumps({"name": "text_stats", "arguments": {"filename": "a.md"}})
    two = json.dumps({"name": "text_stats", "arguments": {"filename": "b.md"}})
    text = f"{one}\n```json\n{one}\n```\n{two}"
    calls, _ = parse_text_tool_calls(text, OFFERED, KNOWN)
    assert [c.id for c in calls] == ["text_call_1", "text_call_2"]
    calls, _ = parse_text_tool_calls(text, OFFERED, KNOWN, start=7)
    assert [c.id for c in calls] == ["text_call_7", "text_call_8"]


def test_articles_and_other_json_are_left_alone() -> None:
    for text in (
        ARTICLE,
        'Citations [S1][S2] and [S1, S2]; a set {1, 2}; JSON {"a": [1, {"b": 2}]}.',
        '{"name": "Alice", "arguments": {"x": 1}}',  # names no tool
        '{"name": "write_project_file", "description": "Write a file.", "arguments": {}}',  # not a call's keys
        '{"result": {"name": "write_project_file", "arguments": {}}}',  # nested in something else
        '{"name": "write_project_file", "arguments": {"filename": "cut off by the limit',
        "",
        "{" * 500 + "[" * 500,
    ):
        assert parse_text_tool_calls(text, OFFERED, KNOWN) == ([], text)


def test_never_raises_on_odd_input() -> None:
    assert parse_text_tool_calls('{"name": "text_stats", "arguments": ' + "[" * 100_000, OFFERED, KNOWN)[0] == []


def _loosely(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower())


_NOT_A_TOOL = st.text(alphabet=st.characters(codec="utf-8"), max_size=30).filter(
    lambda s: not any(name in _loosely(s) for name in KNOWN)
)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | _NOT_A_TOOL,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_NOT_A_TOOL, inner, max_size=4),
    max_leaves=12,
)
_CALL_SHAPED = st.fixed_dictionaries(
    {"name": _NOT_A_TOOL, "arguments": st.one_of(_JSONISH, _JSONISH.map(json.dumps))}
) | st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": _NOT_A_TOOL})})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=60), _JSONISH.map(json.dumps), _CALL_SHAPED.map(json.dumps)), max_size=6))
def test_text_without_tool_names_yields_no_calls(parts: list[str]) -> None:
    text = "\n".join(parts)
    if any(name in _loosely(text) for name in KNOWN):
        return  # st.text may spell a tool name by chance
    assert parse_text_tool_calls(text, OFFERED, KNOWN) == ([], text)


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(alphabet=st.characters(exclude_characters="{[`<"), max_size=40),
    after=st.text(alphabet=st.characters(exclude_characters="{[`<"), max_size=40),
    content=st.text(max_size=80),
    wrap=st.sampled_from(["{}", "```json\n{}\n```", "<tool_call>\n{}\n</tool_call>", "[{}]"]),
)
def test_a_call_anywhere_in_prose_is_found(before: str, after: str, content: str, wrap: str) -> None:
    arguments = {"filename": "outline.md", "content": content}
    text = before + "\n" + wrap.replace("{}", json.dumps({"name": "write_project_file", "arguments": arguments}))
    text += "\n" + after
    calls, rest = parse_text_tool_calls(text, OFFERED, KNOWN)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("write_project_file", arguments)]
    assert "write_project_file" not in rest
