"""An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, TEI)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np

from librarian.embeddings.base import Matrix, normalize_rows
from librarian.errors import BackendUnavailableError, InvalidInputError


class OpenAICompatibleEmbedder:
    """Calls ``POST {base_url}/embeddings`` with ``{"model", "input"}`` and reads ``data[].embedding``."""

    def __init__(
        self,
        base_url: str,
        model_name: str,
        *,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout_seconds: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_seconds, transport=transport
        )
        self._model_name = model_name
        self._batch_size = batch_size
        self._dimension: int | None = None

    @property
    def model_version(self) -> str:
        """``openai-compatible:<model name>``."""
        return f"openai-compatible:{self._model_name}"

    @property
    def dimension(self) -> int:
        """Learned from the first response (one probe request if nothing was embedded yet)."""
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in batches; vectors are normalised to unit length."""
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            rows.extend(self._request(list(texts[start : start + self._batch_size])))
        if not rows:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        matrix = np.asarray(rows, dtype=np.float32)
        self._dimension = int(matrix.shape[1])
        return normalize_rows(matrix)

    def _request(self, batch: list[str]) -> list[list[float]]:
        try:
            response = self._client.post("/embeddings", json={"model": self._model_name, "input": batch})
            response.raise_for_status()
            payload = response.json()
            data = sorted(payload["data"], key=lambda item: item["index"])
            vectors = [list(map(float, item["embedding"])) for item in data]
        except httpx.HTTPError as exc:
            raise BackendUnavailableError(
                f"embeddings endpoint {self._client.base_url} failed: {exc}",
                hint="check LIBRARIAN_EMBEDDING_URL and LIBRARIAN_EMBEDDING_API_KEY",
            ) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"embeddings endpoint {self._client.base_url} returned an unexpected body: {exc}"
            ) from exc
        if len(vectors) != len(batch):
            raise InvalidInputError(
                f"embeddings endpoint returned {len(vectors)} vectors for {len(batch)} texts"
            )
        return vectors
