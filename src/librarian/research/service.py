"""``research_api_usage``: version-correct documentation for an agent whose command just failed.

Resolve the SDK (aliases) and the version (exact, prefix, range, latest, nearest with a note), run the
hybrid search filtered to that one version, boost chunks whose entity or options are named in the
question or the error text, estimate a calibrated confidence, write an extractive summary, and
suggest fallbacks when confidence is low. Never mixes versions; never invents text.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select

from librarian.app import Librarian, SearchResult
from librarian.errors import InvalidInputError
from librarian.research.confidence import RankingFeatures, confidence
from librarian.research.safety import injection_flags, trust_level
from librarian.research.sdks import closest_names, indexed_sdks, resolve_sdk
from librarian.research.versions import resolve_version
from librarian.storage.models import Chunk, Document, Source

LOW_CONFIDENCE = 0.5
CANDIDATES = 20
SNIPPETS = 5
# An option named in the error that a command declares is the strongest evidence there is that the
# command is the one meant (fused scores span 0..1, so this is half the scale).
OPTION_BOOST = 0.5
ENTITY_BOOST = 0.25
_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
_WORD = re.compile(r"[A-Za-z][\w.-]*[A-Za-z0-9]")


@dataclass(frozen=True)
class _Ranked:
    result: SearchResult
    score: float
    option_match: bool
    entity_match: bool


def options_in(text: str) -> list[str]:
    """Option names (``--tagging``, ``-v``) mentioned in ``text``, in order, without duplicates."""
    return list(dict.fromkeys(match.group(0) for match in _OPTION.finditer(text)))


def _accepts_option(result: SearchResult, option: str) -> bool:
    declared = result.attributes.get("options")
    if isinstance(declared, list) and declared:
        return option in declared
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", result.content) is not None


def _entity_named(result: SearchResult, text: str) -> bool:
    if not result.entity_name:
        return False
    words = {w.lower() for w in _WORD.findall(text)}
    entity_words = [w.lower() for w in _WORD.findall(result.entity_name)]
    # A multi-word entity (``s3api put-object``) counts when its most specific word is named.
    return bool(entity_words) and entity_words[-1] in words


def research_api_usage(
    lib: Librarian,
    sdk_name: str,
    query: str,
    version: str | None = None,
    error_text: str | None = None,
) -> dict[str, Any]:
    """How to do ``query`` with ``sdk_name`` at ``version``, given the ``error_text`` a command printed.

    Returns the documented shape: ``error``, ``summary``, ``confidence_score``, ``resolved_version``,
    ``version_note``, ``snippets`` (content, source_url, sdk_version, entity_name, last_fetched_at,
    score, trust_level, flags) and ``fallback_suggestions``.

    Raises:
        InvalidInputError: an empty query.
    """
    if not query.strip():
        raise InvalidInputError("the research query is empty")
    with lib.sessions() as session:
        known = indexed_sdks(session)
    sdk = resolve_sdk(sdk_name, known)
    if sdk is None:
        close = closest_names(sdk_name, known)
        return {
            "error": True,
            "summary": f"No documentation is indexed for an SDK called {sdk_name!r}.",
            "confidence_score": 0.0,
            "resolved_version": None,
            "version_note": "",
            "snippets": [],
            "fallback_suggestions": _unknown_sdk_suggestions(sdk_name, close, known),
        }
    resolution = resolve_version(version, sdk.versions)
    errors = error_text or ""
    options = options_in(errors) + [o for o in options_in(query) if o not in options_in(errors)]
    search_text = " ".join(filter(None, [query, " ".join(options)]))
    results = lib.search(search_text, sdk_name=sdk.name, sdk_version=resolution.resolved, top_k=CANDIDATES)
    ranked = _best_chunk_per_entity(_rerank(results, options, f"{query}\n{errors}"))
    snippets = _snippets(lib, ranked[:SNIPPETS])
    features = ranking_features(ranked)
    score = confidence(features) if features is not None else 0.0
    response: dict[str, Any] = {
        "error": False,
        "sdk_name": sdk.name,
        "summary": _summary(ranked, sdk.name, resolution.resolved),
        "confidence_score": score,
        "resolved_version": resolution.resolved,
        "version_note": resolution.note,
        "snippets": snippets,
        "fallback_suggestions": [],
        "confidence_features": asdict(features) if features is not None else None,
    }
    if score < LOW_CONFIDENCE or not resolution.exact or not snippets:
        response["fallback_suggestions"] = _fallbacks(
            sdk.name, query, version, resolution.exact, resolution.resolved
        )
    return response


def _rerank(results: list[SearchResult], options: list[str], asked: str) -> list[_Ranked]:
    ranked = []
    for result in results:
        option_match = any(_accepts_option(result, option) for option in options)
        entity_match = _entity_named(result, asked)
        score = (
            result.score + (OPTION_BOOST if option_match else 0.0) + (ENTITY_BOOST if entity_match else 0.0)
        )
        ranked.append(_Ranked(result, score, option_match, entity_match))
    # Two stable sorts: by score, and among equal scores the fresher source first.
    ranked.sort(key=lambda r: r.result.last_fetched_at, reverse=True)
    ranked.sort(key=lambda r: -r.score)
    return ranked


def _best_chunk_per_entity(ranked: list[_Ranked]) -> list[_Ranked]:
    """One snippet per entity (its best chunk): five chunks of one long page are not five answers."""
    seen: set[tuple[str | None, str]] = set()
    kept = []
    for item in ranked:
        key = (item.result.entity_name, item.result.source_url)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def ranking_features(ranked: list[_Ranked]) -> RankingFeatures | None:
    """The features the confidence model reads from a ranking (None when nothing was found)."""
    if not ranked:
        return None
    top = ranked[0]
    runner_up = ranked[1].score if len(ranked) > 1 else 0.0
    return RankingFeatures(
        cosine=top.result.vector_score or 0.0,
        margin=max(0.0, top.score - runner_up),
        lexical=1.0 if top.result.lexical_score is not None else 0.0,
        option_match=1.0 if top.option_match else 0.0,
        entity_match=1.0 if top.entity_match else 0.0,
    )


def _snippets(lib: Librarian, ranked: list[_Ranked]) -> list[dict[str, Any]]:
    ids = [r.result.chunk_id for r in ranked]
    with lib.sessions() as session:
        kinds = dict(
            session.execute(
                select(Chunk.id, Source.kind)
                .join(Document, Document.id == Chunk.document_id)
                .join(Source, Source.id == Document.source_id)
                .where(Chunk.id.in_(ids))
            ).all()
        )
    return [
        {
            "content": r.result.content,
            "source_url": r.result.source_url,
            "sdk_version": r.result.sdk_version,
            "entity_name": r.result.entity_name,
            "entity_type": r.result.entity_type,
            "last_fetched_at": r.result.last_fetched_at,
            "score": round(r.score, 4),
            "trust_level": trust_level(kinds.get(r.result.chunk_id)),
            "flags": injection_flags(r.result.content),
        }
        for r in ranked
    ]


def _summary(ranked: list[_Ranked], sdk: str, version: str | None) -> str:
    if not ranked:
        return f"Nothing in the indexed {sdk} {version or ''} documentation matches the question.".replace(
            "  ", " "
        )
    top = ranked[0].result
    synopsis = _synopsis(top.content)
    name = top.entity_name or top.section_path or "the best match"
    return f"{name} ({sdk} {top.sdk_version}): {synopsis} Source: {top.source_url}"


def _synopsis(content: str) -> str:
    fenced = re.search(r"```[^\n]*\n(.+?)```", content, re.DOTALL)
    if fenced:
        first = fenced.group(1).strip().splitlines()
        return f"`{' '.join(line.strip() for line in first[:3])}`"
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(content.split()))
    return sentences[0][:300] if sentences else ""


def _fallbacks(sdk: str, query: str, version: str | None, exact: bool, resolved: str | None) -> list[str]:
    suggestions = []
    if version not in (None, "latest"):
        suggestions.append(
            f"retry with version='latest' (research_api_usage({sdk!r}, {query!r}, version='latest'))"
        )
    if not exact and version:
        suggestions.append(
            f"index the missing version {version}: `librarian ingest-cli COMMAND --sdk {sdk}` with that "
            f"version installed, or `librarian ingest PATH_OR_GIT_URL --sdk {sdk} --version {version}`"
        )
    suggestions.append("broaden the query: name the action and the resource, drop flags and values")
    suggestions.append(
        f"run the tool's own help for the command (e.g. `{sdk} help` or `{sdk} COMMAND --help`)"
    )
    suggestions.append("escalate to a human with the failed command, its error text and this research result")
    return suggestions


def _unknown_sdk_suggestions(requested: str, close: list[str], known: list[Any]) -> list[str]:
    suggestions = []
    if close:
        suggestions.append(f"check the sdk_name: closest indexed SDKs are {', '.join(close)}")
    elif known:
        suggestions.append(f"check the sdk_name: indexed SDKs are {', '.join(s.name for s in known[:10])}")
    suggestions.append(
        f"index it: `librarian ingest-cli {requested} --sdk {requested}` for a CLI, "
        f"`librarian ingest-package DIST` for a Python package, or `librarian ingest PATH --sdk {requested} "
        "--version V` for docs"
    )
    suggestions.append(f"run the tool's own help (`{requested} --help`)")
    suggestions.append("escalate to a human with the failed command and its error text")
    return suggestions
