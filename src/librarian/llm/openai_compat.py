"""An OpenAI-compatible ``/chat/completions`` endpoint: OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM."""

from __future__ import annotations

from typing import Any

from librarian.llm.base import ChatMessage, HttpChatClient


class OpenAICompatibleLLM(HttpChatClient):
    """Calls ``POST {base_url}/chat/completions`` and reads ``choices[0].message.content``.

    ``base_url`` is the API root including its version, as these servers document it:
    ``https://api.openai.com/v1``, ``http://127.0.0.1:11434/v1`` (Ollama), ``http://127.0.0.1:8000/v1``
    (vLLM). The API key, when set, is sent as ``Authorization: Bearer``.

    Example:
        >>> llm = OpenAICompatibleLLM("http://127.0.0.1:11434/v1", "llama3.1")  # doctest: +SKIP
        >>> llm.complete([ChatMessage("user", "Say hi")])  # doctest: +SKIP
        'Hi!'
    """

    kind = "OpenAI-compatible LLM"

    def _path(self) -> str:
        return "/chat/completions"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _payload(
        self, messages: list[ChatMessage], system: str | None, max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        turns = [{"role": "system", "content": system}] if system else []
        turns += [{"role": m.role, "content": m.content} for m in messages]
        return {
            "model": self.model_name,
            "messages": turns,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": False,
        }

    def _parse(self, body: Any) -> str:
        content = body["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            # ``null`` content means the model answered with a tool call or refused.
            raise TypeError(f"choices[0].message.content is {type(content).__name__}, not text")
        return content
