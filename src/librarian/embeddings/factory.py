"""Builds the configured embedder."""

from __future__ import annotations

from librarian.config import Settings
from librarian.embeddings.base import Embedder
from librarian.embeddings.local import LocalMiniLMEmbedder
from librarian.embeddings.openai import OpenAICompatibleEmbedder
from librarian.errors import InvalidInputError


def create_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings`` ask for: local MiniLM (default) or an OpenAI-compatible endpoint.

    Raises:
        InvalidInputError: ``embedding_provider`` is ``openai`` but no ``embedding_url`` is set.
    """
    if settings.embedding_provider == "openai":
        if not settings.embedding_url:
            raise InvalidInputError(
                "embedding_provider is 'openai' but embedding_url is not set",
                hint="set LIBRARIAN_EMBEDDING_URL, e.g. http://127.0.0.1:8000/v1",
            )
        key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
        return OpenAICompatibleEmbedder(
            settings.embedding_url,
            settings.embedding_model,
            api_key=key,
            batch_size=settings.embedding_batch_size,
            timeout_seconds=settings.embedding_timeout_seconds,
        )
    return LocalMiniLMEmbedder(
        settings.embedding_model,
        batch_size=settings.embedding_batch_size,
        numpy_queries=settings.embedding_numpy_queries,
    )
