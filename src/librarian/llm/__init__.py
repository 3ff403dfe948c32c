"""The optional LLM layer: research summaries now, workflow plans and corrections later.

``create_llm(settings)`` returns None unless ``llm_provider`` is set, and every caller has a path that
works without a model.
"""

from librarian.llm.base import ChatMessage, LLMClient, LLMError, LLMOutputError, endpoint_of
from librarian.llm.factory import create_llm
from librarian.llm.structured import complete_json

__all__ = [
    "ChatMessage",
    "LLMClient",
    "LLMError",
    "LLMOutputError",
    "complete_json",
    "create_llm",
    "endpoint_of",
]
