"""Builds the configured LLM client, or none: everything in Librarian works without one."""

from __future__ import annotations

from librarian.config import Settings
from librarian.errors import InvalidInputError
from librarian.llm.anthropic import ANTHROPIC_URL, AnthropicLLM
from librarian.llm.base import LLMClient
from librarian.llm.openai_compat import OpenAICompatibleLLM


def create_llm(settings: Settings) -> LLMClient | None:
    """The LLM ``settings`` ask for, or None when ``llm_provider`` is ``none``.

    ``openai`` needs ``llm_url`` and ``llm_model``; ``anthropic`` needs ``llm_model`` (``llm_url``
    defaults to Anthropic's API). No request is sent here, so a wrong URL shows on first use.

    Raises:
        InvalidInputError: a setting the provider needs is not set (the error names it).
    """
    provider = settings.llm_provider
    if provider == "none":
        return None
    if not settings.llm_model:
        raise InvalidInputError(
            f"llm_provider is {provider!r} but llm_model is not set",
            hint="set LIBRARIAN_LLM_MODEL to a model the endpoint serves, or LIBRARIAN_LLM_PROVIDER=none",
        )
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if provider == "anthropic":
        return AnthropicLLM(
            settings.llm_url or ANTHROPIC_URL,
            settings.llm_model,
            api_key=key,
            timeout_seconds=settings.llm_timeout_seconds,
            max_tokens=settings.llm_max_tokens,
        )
    if not settings.llm_url:
        raise InvalidInputError(
            "llm_provider is 'openai' but llm_url is not set",
            hint="set LIBRARIAN_LLM_URL to the API root, e.g. https://api.openai.com/v1 or "
            "http://127.0.0.1:11434/v1 (Ollama)",
        )
    return OpenAICompatibleLLM(
        settings.llm_url,
        settings.llm_model,
        api_key=key,
        timeout_seconds=settings.llm_timeout_seconds,
        max_tokens=settings.llm_max_tokens,
    )
