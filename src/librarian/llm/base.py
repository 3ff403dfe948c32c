"""The contract of a chat LLM, its errors, and the HTTP plumbing both backends share.

Librarian works without an LLM; when one is configured it writes research summaries and, later,
workflow plans and corrections. Every backend is an :class:`LLMClient`; the two HTTP backends
(OpenAI-compatible and Anthropic) differ only in request and response shapes, so timeouts, retries
and error reporting live once here in :class:`HttpChatClient`.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx

from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.urls import without_password

# 429: rate limited; 5xx: the server or a proxy in front of it failed; 529: Anthropic "overloaded".
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# A Retry-After header is obeyed, but never for longer than this: a caller is usually waiting.
MAX_RETRY_AFTER_SECONDS = 30.0
_DETAIL_CHARS = 300


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation. System instructions are passed separately (``system=``)."""

    role: Literal["user", "assistant"]
    content: str


class LLMClient(Protocol):
    """A chat model that answers a conversation with text."""

    @property
    def model_name(self) -> str:
        """The model name sent to the endpoint (recorded with whatever the model produced)."""
        ...

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> str:
        """The model's answer to ``messages`` (the last one is usually the user's).

        Args:
            messages: the conversation so far, oldest first.
            system: instructions that frame the whole conversation.
            max_tokens: the longest answer wanted; the client's configured default when None.
            temperature: sampling temperature; 0 for the most repeatable answers.

        Raises:
            LLMError: the endpoint could not be reached, refused the request or answered nonsense.
        """
        ...

    def close(self) -> None:
        """Release connections (the client must not be used afterwards)."""
        ...


class LLMError(BackendUnavailableError):
    """The LLM endpoint failed: unreachable, too slow, an HTTP error, or an unreadable answer.

    The message names the endpoint and the HTTP status (``http_status``), never the API key.
    """

    category = "llm_unavailable"

    def __init__(
        self, message: str, *, endpoint: str, http_status: int | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.endpoint = endpoint
        self.http_status = http_status


class LLMOutputError(LLMError):
    """The model answered, but never in the form asked for (for example JSON matching a schema)."""

    category = "llm_output_invalid"

    def __init__(self, message: str, *, endpoint: str, last_problem: str, last_answer: str) -> None:
        super().__init__(message, endpoint=endpoint, hint="try a stronger model or a simpler request")
        self.last_problem = last_problem
        self.last_answer = last_answer


class HttpChatClient(ABC):
    """Shared HTTP behaviour: one ``httpx.Client``, a timeout, bounded retries, clear errors.

    Retried (up to ``max_attempts`` in all, with exponential backoff or the server's Retry-After):
    HTTP 408/409/429/5xx/529, failed connections and connection timeouts. A read timeout is not
    retried: the endpoint accepted the request and is too slow for it, so retrying would only
    multiply the caller's wait.
    """

    #: Shown in error messages ("OpenAI-compatible LLM endpoint ...").
    kind: str = "LLM"

    def __init__(
        self,
        base_url: str,
        model_name: str,
        *,
        api_key: str | None = None,
        timeout_seconds: float = 60.0,
        max_tokens: int = 1024,
        max_attempts: int = 3,
        backoff_seconds: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Prepare a client for ``base_url`` (nothing is sent until :meth:`complete`).

        Args:
            base_url: the API root, as each backend documents it.
            model_name: the model name sent with every request.
            api_key: the credential, if the endpoint needs one.
            timeout_seconds: time limit of one HTTP request.
            max_tokens: the default answer length limit.
            max_attempts: attempts per request, counting the first (at least 1).
            backoff_seconds: the first wait between attempts; doubled each time.
            transport: an httpx transport (tests); the network by default.
        """
        if max_attempts < 1:
            raise InvalidInputError(f"max_attempts must be at least 1, got {max_attempts}")
        self._model_name = model_name
        self._api_key = api_key
        self._timeout_seconds = timeout_seconds
        self._max_tokens = max_tokens
        self._max_attempts = max_attempts
        self._backoff_seconds = backoff_seconds
        self._base_url = self._root(base_url)
        self._client = httpx.Client(
            base_url=self._base_url,
            headers=self._headers(api_key),
            timeout=timeout_seconds,
            transport=transport,
        )

    @property
    def model_name(self) -> str:
        """The model name sent with every request."""
        return self._model_name

    @property
    def endpoint(self) -> str:
        """The URL requests go to, with any password in it masked (safe to print)."""
        return without_password(f"{self._base_url}{self._path()}")

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> str:
        """The model's answer to ``messages``; see :meth:`LLMClient.complete`."""
        if not messages:
            raise InvalidInputError("an LLM request needs at least one message")
        payload = self._payload(list(messages), system, max_tokens or self._max_tokens, temperature)
        body = self._post(payload)
        try:
            return self._parse(body)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LLMError(
                f"{self.kind} endpoint {self.endpoint} returned an answer without text "
                f"({type(exc).__name__}: {exc}): {self._redact(str(body))[:_DETAIL_CHARS]}",
                endpoint=self.endpoint,
                http_status=200,
                hint="check that LIBRARIAN_LLM_PROVIDER matches the API the endpoint speaks",
            ) from exc

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    # -- what each backend defines --------------------------------------------------------------

    def _root(self, base_url: str) -> str:
        """The base URL as requests use it (backends may normalise what users type)."""
        return base_url.rstrip("/")

    @abstractmethod
    def _path(self) -> str:
        """The request path under the base URL."""

    @abstractmethod
    def _headers(self, api_key: str | None) -> dict[str, str]:
        """Headers sent with every request (authentication, API version)."""

    @abstractmethod
    def _payload(
        self, messages: list[ChatMessage], system: str | None, max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        """The JSON request body."""

    @abstractmethod
    def _parse(self, body: Any) -> str:
        """The answer text in a successful JSON response (may raise KeyError/TypeError/...)."""

    # -- shared HTTP behaviour ------------------------------------------------------------------

    def _post(self, payload: dict[str, Any]) -> Any:
        for attempt in range(1, self._max_attempts + 1):
            last = attempt == self._max_attempts
            try:
                response = self._client.post(self._path(), json=payload)
            except httpx.ConnectTimeout as exc:
                if not last:
                    self._wait(attempt, None)
                    continue
                raise self._error(f"could not connect within {self._timeout_seconds:g} s", exc) from exc
            except httpx.TimeoutException as exc:
                raise self._error(
                    f"did not answer within {self._timeout_seconds:g} s",
                    exc,
                    hint="raise LIBRARIAN_LLM_TIMEOUT_SECONDS or use a faster model",
                ) from exc
            except httpx.TransportError as exc:
                if not last:
                    self._wait(attempt, None)
                    continue
                raise self._error(f"could not be reached after {attempt} attempts", exc) from exc
            if response.status_code in RETRYABLE_STATUSES and not last:
                self._wait(attempt, response.headers.get("retry-after"))
                continue
            if response.is_error:
                raise self._http_error(response, attempt)
            try:
                return response.json()
            except ValueError as exc:
                raise LLMError(
                    f"{self.kind} endpoint {self.endpoint} answered HTTP {response.status_code} with a "
                    f"body that is not JSON: {self._redact(response.text)[:_DETAIL_CHARS]!r}",
                    endpoint=self.endpoint,
                    http_status=response.status_code,
                    hint="check LIBRARIAN_LLM_URL: it should be the API root, not a web page",
                ) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = self._backoff_seconds * 2 ** (attempt - 1)
        # An HTTP-date Retry-After is rare from LLM APIs; the backoff is a fine substitute for it.
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                delay = max(0.0, min(float(retry_after), MAX_RETRY_AFTER_SECONDS))
        time.sleep(delay)

    def _error(self, what: str, exc: Exception, *, hint: str | None = None) -> LLMError:
        return LLMError(
            f"{self.kind} endpoint {self.endpoint} {what}: {self._redact(str(exc)) or type(exc).__name__}",
            endpoint=self.endpoint,
            hint=hint or "check LIBRARIAN_LLM_URL and that the LLM server is running",
        )

    def _http_error(self, response: httpx.Response, attempts: int) -> LLMError:
        status = response.status_code
        tried = f" (after {attempts} attempts)" if attempts > 1 else ""
        if status in (401, 403):
            hint = "check LIBRARIAN_LLM_API_KEY"
        elif status == 404:
            hint = "check LIBRARIAN_LLM_URL and LIBRARIAN_LLM_MODEL"
        elif status in RETRYABLE_STATUSES:
            hint = "the LLM service is overloaded or failing; try again later"
        else:
            hint = "check LIBRARIAN_LLM_MODEL and LIBRARIAN_LLM_MAX_TOKENS"
        return LLMError(
            f"{self.kind} endpoint {self.endpoint} answered HTTP {status}{tried}: "
            f"{self._redact(_error_detail(response))}",
            endpoint=self.endpoint,
            http_status=status,
            hint=hint,
        )

    def _redact(self, text: str) -> str:
        # Some APIs echo (part of) a rejected key back; never let it reach a log or a user.
        return text.replace(self._api_key, "***") if self._api_key else text


def _error_detail(response: httpx.Response) -> str:
    """The error message of an error response: OpenAI and Anthropic both use ``error.message``."""
    try:
        body = response.json()
        message = body["error"]["message"] if isinstance(body.get("error"), dict) else body["error"]
        return str(message)[:_DETAIL_CHARS]
    except (ValueError, KeyError, TypeError, AttributeError):
        return response.text[:_DETAIL_CHARS] or response.reason_phrase


def endpoint_of(client: LLMClient) -> str:
    """What error messages name for ``client``: its endpoint URL, else its model name."""
    return str(getattr(client, "endpoint", client.model_name))
