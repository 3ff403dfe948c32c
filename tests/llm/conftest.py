"""Fixtures of the LLM tests: a real local HTTP server speaking the OpenAI and Anthropic APIs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.fake_llm_server import FakeLLMServer


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started :class:`FakeLLMServer`, stopped after the test."""
    with FakeLLMServer() as server:
        yield server
