"""``complete_json``: JSON extraction, schema validation and repair turns, over a real HTTP server."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from librarian.errors import InvalidInputError
from librarian.llm import ChatMessage, LLMError, LLMOutputError, complete_json
from librarian.llm.openai_compat import OpenAICompatibleLLM
from librarian.llm.structured import extract_json_object
from tests.llm.fake_llm_server import FakeLLMServer, FakeReply

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["steps"],
    "properties": {
        "steps": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "command"],
                "properties": {"name": {"type": "string"}, "command": {"type": "string"}},
            },
        }
    },
}
ASK = [ChatMessage("user", "Plan an upload to S3.")]
VALID = {"steps": [{"name": "upload", "command": "aws s3 cp a s3://b/a"}]}


def client(server: FakeLLMServer) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(server.openai_url, "planner", backoff_seconds=0.0, timeout_seconds=5.0)


def test_fenced_json_amid_prose_is_extracted(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(f"Here is the plan:\n```json\n{json.dumps(VALID, indent=2)}\n```\nGood luck!")

    assert complete_json(client(fake_llm), ASK, PLAN_SCHEMA, system="You plan.") == VALID

    (request,) = fake_llm.requests
    system = request.body["messages"][0]["content"]
    assert system.startswith("You plan.") and '"required": ["steps"]' in system


def test_invalid_json_then_valid_sends_a_repair_turn_with_the_error(fake_llm: FakeLLMServer) -> None:
    broken = '{"steps": [{"name": "upload", "command": "aws s3 cp a s3://b/a"}'
    fake_llm.queue(broken, json.dumps(VALID))

    assert complete_json(client(fake_llm), ASK, PLAN_SCHEMA) == VALID

    first, repair = fake_llm.requests
    turns = repair.body["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "user"]
    assert turns[2]["content"] == broken
    assert "no valid JSON object" in turns[3]["content"] and "character" in turns[3]["content"]
    assert len(first.body["messages"]) == 2


def test_schema_violation_exhausts_attempts_and_names_the_problem(fake_llm: FakeLLMServer) -> None:
    wrong = json.dumps({"steps": [{"name": "upload"}]})
    fake_llm.queue(wrong, wrong, "never asked")

    with pytest.raises(LLMOutputError) as caught:
        complete_json(client(fake_llm), ASK, PLAN_SCHEMA, max_attempts=2)

    problem = "at $.steps[0]: 'command' is a required property"
    assert problem in str(caught.value) and "in 2 attempts" in str(caught.value)
    assert caught.value.last_answer == wrong and isinstance(caught.value, LLMError)
    assert len(fake_llm.requests) == 2 and fake_llm.pending == 1
    assert problem in fake_llm.requests[1].body["messages"][-1]["content"]


def test_endpoint_failure_is_not_repaired(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(FakeReply(status=400, text="bad request"))

    with pytest.raises(LLMError, match="HTTP 400") as caught:
        complete_json(client(fake_llm), ASK, PLAN_SCHEMA)
    assert not isinstance(caught.value, LLMOutputError) and len(fake_llm.requests) == 1


def test_an_invalid_schema_is_a_programming_error() -> None:
    # Rejected before any request: no server needed, the URL is never contacted.
    llm = OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m")
    with pytest.raises(InvalidInputError, match="schema given to complete_json is invalid"):
        complete_json(llm, ASK, {"type": "no-such-type"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! {"a": {"b": [1, 2]}} Hope this helps {not json}.', {"a": {"b": [1, 2]}}),
        ('Use {curly} words? Then: {"a": 1}', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
    ],
)
def test_extract_json_object_finds_the_object(text: str, expected: dict[str, Any]) -> None:
    assert extract_json_object(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "a JSON array, not an object"),
        ("no json here", "no '{' at all"),
        # A truncated answer must not yield its nested fragment {"name": "x"} as the answer.
        ('{"steps": [{"name": "x"}, ', "no valid JSON object"),
    ],
)
def test_extract_json_object_explains_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        extract_json_object(text)
