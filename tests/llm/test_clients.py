"""The OpenAI-compatible and Anthropic clients against a real local HTTP server."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from librarian.config import Settings
from librarian.errors import InvalidInputError
from librarian.llm import ChatMessage, LLMError, create_llm
from librarian.llm.anthropic import AnthropicLLM
from librarian.llm.openai_compat import OpenAICompatibleLLM
from tests.llm.fake_llm_server import ANTHROPIC_PATH, OPENAI_PATH, FakeLLMServer, FakeReply

KEY = "sk-test-secret-123"
QUESTION = [ChatMessage("user", "How do I upload a file?")]


def openai_client(server: FakeLLMServer, **options: float) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        server.openai_url,
        "local-model",
        api_key=KEY,
        backoff_seconds=0.0,
        timeout_seconds=options.get("timeout_seconds", 5.0),
    )


def test_openai_request_shape_bearer_header_and_answer(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    fake_llm.queue("Use put-object.")
    settings = Settings(
        home=tmp_path,
        llm_provider="openai",
        llm_url=fake_llm.openai_url,
        llm_model="m1",
        llm_api_key=SecretStr(KEY),
    )
    llm = create_llm(settings)
    assert llm is not None

    answer = llm.complete(QUESTION, system="Be brief.", max_tokens=50)

    assert answer == "Use put-object." and llm.model_name == "m1"
    (request,) = fake_llm.requests
    assert request.path == OPENAI_PATH
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "m1" and request.body["max_tokens"] == 50
    assert request.body["temperature"] == 0.0
    assert request.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "How do I upload a file?"},
    ]
    llm.close()


def test_openai_without_key_sends_no_authorization(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue("ok")
    llm = OpenAICompatibleLLM(fake_llm.openai_url, "m", max_tokens=77)

    llm.complete(QUESTION)

    (request,) = fake_llm.requests
    assert "authorization" not in request.headers and request.body["max_tokens"] == 77
    assert [m["role"] for m in request.body["messages"]] == ["user"]


def test_anthropic_headers_system_field_and_text_blocks(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    fake_llm.queue(
        FakeReply(
            body={
                "type": "message",
                "content": [{"type": "text", "text": "Use "}, {"type": "text", "text": "put-object."}],
                "stop_reason": "end_turn",
            }
        )
    )
    settings = Settings(
        home=tmp_path,
        llm_provider="anthropic",
        llm_url=fake_llm.url,
        llm_model="claude-x",
        llm_api_key=SecretStr(KEY),
    )
    llm = create_llm(settings)
    assert llm is not None

    answer = llm.complete(QUESTION, system="Be brief.", max_tokens=64)

    assert answer == "Use put-object."
    (request,) = fake_llm.requests
    assert request.path == ANTHROPIC_PATH
    assert request.headers["x-api-key"] == KEY and "authorization" not in request.headers
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["system"] == "Be brief." and request.body["max_tokens"] == 64
    assert request.body["messages"] == [{"role": "user", "content": "How do I upload a file?"}]


def test_anthropic_accepts_a_base_url_ending_in_v1(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue("hi")
    llm = AnthropicLLM(fake_llm.openai_url + "/", "claude-x")

    assert llm.complete(QUESTION) == "hi"
    assert fake_llm.requests[0].path == ANTHROPIC_PATH and "system" not in fake_llm.requests[0].body


def test_retries_after_a_500_then_succeeds(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(FakeReply(status=500), FakeReply(status=429, headers={"Retry-After": "0"}), "fine")

    assert openai_client(fake_llm).complete(QUESTION) == "fine"
    assert len(fake_llm.requests) == 3


def test_gives_up_after_max_attempts_naming_endpoint_and_status(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(*[FakeReply(status=503, text="overloaded")] * 3, "never sent")

    with pytest.raises(LLMError) as caught:
        openai_client(fake_llm).complete(QUESTION)

    assert caught.value.http_status == 503 and caught.value.status_code == 503
    assert f"{fake_llm.openai_url}/chat/completions" in str(caught.value)
    assert "HTTP 503" in str(caught.value) and "overloaded" in str(caught.value)
    assert len(fake_llm.requests) == 3 and fake_llm.pending == 1


def test_client_errors_are_not_retried_and_never_show_the_key(fake_llm: FakeLLMServer) -> None:
    # Some APIs echo the rejected key in their message.
    fake_llm.queue(FakeReply(status=401, text=f"Incorrect API key provided: {KEY}"))

    with pytest.raises(LLMError) as caught:
        openai_client(fake_llm).complete(QUESTION)

    assert caught.value.http_status == 401 and len(fake_llm.requests) == 1
    assert KEY not in str(caught.value) and "LIBRARIAN_LLM_API_KEY" in str(caught.value)


def test_timeout_raises_llm_error_without_retrying(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(FakeReply(text="too late", delay_seconds=5.0))

    with pytest.raises(LLMError, match=r"did not answer within 0\.3 s"):
        openai_client(fake_llm, timeout_seconds=0.3).complete(QUESTION)

    assert len(fake_llm.requests) == 1


def test_unreachable_endpoint_raises_llm_error() -> None:
    with FakeLLMServer() as server:
        url = server.openai_url
    llm = OpenAICompatibleLLM(url, "m", backoff_seconds=0.0, timeout_seconds=2.0)

    with pytest.raises(LLMError, match="could not be reached after 3 attempts") as caught:
        llm.complete(QUESTION)
    assert caught.value.http_status is None


def test_an_answer_without_text_is_an_llm_error(fake_llm: FakeLLMServer) -> None:
    fake_llm.queue(FakeReply(body={"choices": [{"message": {"role": "assistant", "content": None}}]}))

    with pytest.raises(LLMError, match="returned an answer without text"):
        openai_client(fake_llm).complete(QUESTION)


def test_factory_returns_none_without_provider_and_names_missing_settings(tmp_path: Path) -> None:
    assert create_llm(Settings(home=tmp_path)) is None
    with pytest.raises(InvalidInputError, match="llm_url is not set"):
        create_llm(Settings(home=tmp_path, llm_provider="openai", llm_model="m"))
    with pytest.raises(InvalidInputError, match="llm_model is not set"):
        create_llm(Settings(home=tmp_path, llm_provider="anthropic"))
    anthropic = create_llm(Settings(home=tmp_path, llm_provider="anthropic", llm_model="claude-x"))
    assert isinstance(anthropic, AnthropicLLM)
    assert anthropic.endpoint == "https://api.anthropic.com/v1/messages"
