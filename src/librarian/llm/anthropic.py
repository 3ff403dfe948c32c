"""Anthropic's Messages API (``POST /v1/messages``), spoken over plain HTTP without the SDK."""

from __future__ import annotations

from typing import Any

from librarian.llm.base import ChatMessage, HttpChatClient

ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicLLM(HttpChatClient):
    """Calls ``POST {base_url}/v1/messages`` and joins the ``text`` blocks of ``content``.

    ``base_url`` is the API host (``ANTHROPIC_URL`` for Anthropic itself); a trailing ``/v1`` is
    accepted too, so the same URL style as the OpenAI-compatible backend works. The key goes in the
    ``x-api-key`` header and the system prompt in the top-level ``system`` field, as the API requires.

    Example:
        >>> llm = AnthropicLLM(ANTHROPIC_URL, "claude-sonnet-4-5", api_key="...")  # doctest: +SKIP
        >>> llm.complete([ChatMessage("user", "Say hi")], system="Be brief.")  # doctest: +SKIP
        'Hi!'
    """

    kind = "Anthropic LLM"

    def _root(self, base_url: str) -> str:
        return base_url.rstrip("/").removesuffix("/v1")

    def _path(self) -> str:
        return "/v1/messages"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _payload(
        self, messages: list[ChatMessage], system: str | None, max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": temperature,
        }
        if system:
            payload["system"] = system
        return payload

    def _parse(self, body: Any) -> str:
        texts = [block["text"] for block in body["content"] if block.get("type") == "text"]
        if not texts:
            raise ValueError(f"no text block in content (stop_reason={body.get('stop_reason')!r})")
        return "".join(texts)
