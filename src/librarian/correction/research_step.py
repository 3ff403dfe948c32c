"""The loop's research calls: what it asks ``research_api_usage``, and the record it keeps of each call.

Research returns each entity's best-matching *chunk*; a correction needs the entity's whole page
(its synopsis, every option with its description). So each snippet's ``content`` is replaced by the
current text of the document it came from, in the same SDK version (the chunk stays as ``excerpt``),
and its injection flags are computed again over that text.

The first question is the task's own description (or the workflow's goal) with the error text and the
detected version, so research filters to the installed release and boosts the commands that accept
the options the error rejects. The broader question, asked only when nothing reached the confidence
threshold, drops the failed command's values (files, URLs, ``k=v`` pairs), adds the command's own
words and asks for ``version='latest'``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from librarian.app import Librarian
from librarian.correction.values import parse_command
from librarian.errors import LibrarianError
from librarian.research.safety import injection_flags
from librarian.research.service import research_api_usage
from librarian.storage.models import Document, DocumentVersion, Source

__all__ = [
    "ResearchAttempt",
    "Researcher",
    "broader_query",
    "merged_snippets",
    "primary_query",
    "used_snippets",
]

_SNIPPET_EXCERPT = 600
_PAGE_LIMIT = 60_000
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class ResearchAttempt:
    """One call of ``research_api_usage`` and what it returned.

    Attributes:
        sdk_name, query, version, error_text: what was asked.
        resolved_version, version_note: the version research used and why.
        confidence: research's calibrated confidence.
        snippets: the snippets, as research returned them.
        suggestions: research's fallback suggestions.
        error: research could not answer (unknown SDK, nothing indexed); ``message`` says why.
        seconds: how long the call took.
    """

    sdk_name: str
    query: str
    version: str | None
    error_text: str
    resolved_version: str | None = None
    version_note: str = ""
    confidence: float = 0.0
    snippets: list[dict[str, Any]] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    error: bool = False
    message: str = ""
    seconds: float = 0.0

    def top(self, count: int = 5) -> list[dict[str, Any]]:
        """The best snippets in short form (entity, URL, version, score, an excerpt)."""
        return [
            {
                "entity_name": s.get("entity_name"),
                "source_url": s.get("source_url"),
                "sdk_version": s.get("sdk_version"),
                "score": s.get("score"),
                "matched_options": list(s.get("matched_options") or []),
                "excerpt": str(s.get("excerpt") or s.get("content") or "")[:_SNIPPET_EXCERPT],
            }
            for s in self.snippets[:count]
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (top snippets only), for the timeline and the escalation report."""
        return {
            "sdk_name": self.sdk_name,
            "query": self.query,
            "version": self.version,
            "resolved_version": self.resolved_version,
            "version_note": self.version_note,
            "confidence": self.confidence,
            "error": self.error,
            "message": self.message,
            "seconds": round(self.seconds, 4),
            "top_snippets": self.top(),
            "suggestions": list(self.suggestions),
        }


class Researcher:
    """Asks the documentation store, and counts how often.

    Args:
        librarian: the documentation store; ``None`` means research is unavailable (every call
            returns an error attempt, and the loop falls back).
    """

    def __init__(self, librarian: Librarian | None) -> None:
        self.librarian = librarian

    def research(self, sdk_name: str, query: str, version: str | None, error_text: str) -> ResearchAttempt:
        """Call ``research_api_usage``; a failure of the store becomes an error attempt, not a crash."""
        started = time.perf_counter()
        if self.librarian is None:
            return ResearchAttempt(
                sdk_name,
                query,
                version,
                error_text,
                error=True,
                message="no documentation store is configured",
            )
        try:
            answer = research_api_usage(
                self.librarian, sdk_name, query, version=version, error_text=error_text
            )
        except LibrarianError as exc:
            return ResearchAttempt(
                sdk_name,
                query,
                version,
                error_text,
                error=True,
                message=exc.message,
                seconds=time.perf_counter() - started,
            )
        return ResearchAttempt(
            sdk_name=sdk_name,
            query=query,
            version=version,
            error_text=error_text,
            resolved_version=answer.get("resolved_version"),
            version_note=str(answer.get("version_note") or ""),
            confidence=float(answer.get("confidence_score") or 0.0),
            snippets=self._with_pages([dict(s) for s in answer.get("snippets") or []]),
            suggestions=[str(s) for s in answer.get("fallback_suggestions") or []],
            error=bool(answer.get("error")),
            message=str(answer.get("summary") or "") if answer.get("error") else "",
            seconds=time.perf_counter() - started,
        )

    def _with_pages(self, snippets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The snippets with ``content`` = their document's current text (see the module docs)."""
        if self.librarian is None or not snippets:
            return snippets
        urls = {str(s.get("source_url")) for s in snippets if s.get("source_url")}
        query = (
            select(Document.source_url, Source.sdk_version, DocumentVersion.text)
            .join(Source, Source.id == Document.source_id)
            .join(
                DocumentVersion,
                (DocumentVersion.document_id == Document.id)
                & (DocumentVersion.version_no == Document.current_version_no),
            )
            .where(Document.source_url.in_(urls), Document.deleted_at.is_(None))
        )
        with self.librarian.sessions() as session:
            pages = {(url, version): text for url, version, text in session.execute(query)}
        enriched = []
        for snippet in snippets:
            version = snippet.get("sdk_version")
            page = pages.get((str(snippet.get("source_url")), str(version) if version is not None else None))
            if page and len(page) > len(str(snippet.get("content") or "")):
                page = page[:_PAGE_LIMIT]
                snippet = {
                    **snippet,
                    "excerpt": snippet.get("content"),
                    "content": page,
                    "flags": sorted({*(snippet.get("flags") or []), *injection_flags(page)}),
                }
            enriched.append(snippet)
        return enriched


def primary_query(description: str, goal: str, key: str) -> str:
    """The task's description when it says more than its key, else the workflow's goal."""
    text = description.strip()
    if not text or text == key:
        text = goal.strip()
    return text or key


def broader_query(goal: str, argv: Sequence[str], tool: str, rejected: Sequence[str]) -> str:
    """The goal without the failed command's values, plus the command's words and rejected options.

    Example:
        >>> broader_query("Send notes.txt to x://box", ["tool", "send", "notes.txt", "x://box"], "tool", [])
        'Send to tool send'
    """
    parsed = parse_command(list(argv), tool=tool or None)
    values = {value.text for value in parsed.values}
    words = [w for w in _WORD.findall(goal) if w not in values and w.rstrip(".,;:") not in values]
    extra = [tool, *parsed.command_path, *rejected]
    return " ".join(dict.fromkeys([*words, *extra]))


def merged_snippets(attempts: Sequence[ResearchAttempt]) -> list[dict[str, Any]]:
    """The snippets of every research attempt, one per entity and source (the best score kept)."""
    best: dict[tuple[Any, Any], dict[str, Any]] = {}
    for attempt in attempts:
        for snippet in attempt.snippets:
            key = (snippet.get("entity_name"), snippet.get("source_url"))
            if key not in best or float(snippet.get("score") or 0) > float(best[key].get("score") or 0):
                best[key] = {**snippet, "sdk_name": attempt.sdk_name}
    return sorted(best.values(), key=lambda s: -float(s.get("score") or 0))


def used_snippets(entity_name: object, attempts: Sequence[ResearchAttempt]) -> list[dict[str, Any]]:
    """The top research snippets in short form; the one a correction names is marked ``used``."""
    rows = []
    for snippet in merged_snippets(attempts)[:5]:
        rows.append(
            {
                "entity_name": snippet.get("entity_name"),
                "source_url": snippet.get("source_url"),
                "sdk_name": snippet.get("sdk_name"),
                "sdk_version": snippet.get("sdk_version"),
                "score": snippet.get("score"),
                "used": bool(entity_name) and snippet.get("entity_name") == entity_name,
            }
        )
    return rows
