"""``research_api_usage``: version-correct documentation for an agent whose command just failed.

Resolve the SDK (aliases) and the version (exact, prefix, range, latest, nearest with a note), run the
hybrid search filtered to that one version, boost chunks whose entity or options are named in the
question or the error text, estimate a calibrated confidence, write an extractive summary, and
suggest fallbacks when confidence is low. Never mixes versions; never invents text.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from librarian.app import Librarian, SearchResult, search_result
from librarian.budget import fit
from librarian.errors import InvalidInputError
from librarian.knowledge.access import Principal
from librarian.research.confidence import RankingFeatures, confidence, version_adjusted
from librarian.research.coverage import (
    Coverage,
    command_lines,
    declares_options,
    indexed_scopes,
    missing_commands,
)
from librarian.research.error_evidence import (
    ChunkRef,
    best_chunk_by_similarity,
    option_docs,
    option_fit,
    option_values,
)
from librarian.research.feedback import FeedbackBoost, SnippetKey, feedback_boosts
from librarian.research.safety import injection_flags, trust_level
from librarian.research.sdks import closest_names, find_sdk, indexed_sdks
from librarian.research.summary import summarize
from librarian.research.versions import resolve_version
from librarian.storage import repository
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
    feedback: FeedbackBoost | None = None
    # How well the error's option values fit this entity's documentation (error_evidence.option_fit).
    option_fit: float | None = None


def options_in(text: str) -> list[str]:
    """Option names (``--tagging``, ``-v``) mentioned in ``text``, in order, without duplicates."""
    return list(dict.fromkeys(match.group(0) for match in _OPTION.finditer(text)))


def _accepts_option(result: SearchResult, option: str) -> bool:
    declared = result.attributes.get("options")
    if isinstance(declared, list) and declared:
        return option in declared
    return _mentions(result.content, option)


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
    principal: Principal | None = None,
    max_chars: int | None = None,
) -> dict[str, Any]:
    """How to do ``query`` with ``sdk_name`` at ``version``, given the ``error_text`` a command printed.

    ``max_chars`` bounds the snippets' JSON (:mod:`librarian.budget`): the best snippets that fit are
    returned whole and ``trimmed`` says how many were left out (null when none were).

    Only documentation ``principal`` may read is used (default: the local organisation's user).

    Returns the documented shape: ``error``, ``summary``, ``confidence_score``, ``resolved_version``,
    ``version_note``, ``snippets`` (content, source_url, sdk_version, entity_name, last_fetched_at,
    score, trust_level, flags, and ``feedback`` on snippets that recorded feedback moved) and
    ``fallback_suggestions``.

    Snippets that agents reported as resolving the same or a similar error (``librarian feedback``)
    gain up to 0.3 of score, and ones reported as unhelpful lose as much
    (:mod:`librarian.research.feedback`).

    Raises:
        InvalidInputError: an empty query.
    """
    if not query.strip():
        raise InvalidInputError("the research query is empty")
    caller = principal or lib.default_principal
    with lib.sessions() as session:
        sdk = find_sdk(session, sdk_name, caller.grants)
        known = indexed_sdks(session, caller.grants) if sdk is None else []
    if sdk is None:
        close = closest_names(sdk_name, known)
        return {
            "error": True,
            "summary": f"No documentation is indexed for an SDK called {sdk_name!r}.",
            "summary_method": "extractive",
            "confidence_score": 0.0,
            "confidence_note": None,
            "resolved_version": None,
            "version_note": "",
            "snippets": [],
            "trimmed": None,
            "fallback_suggestions": _unknown_sdk_suggestions(sdk_name, close, known),
        }
    resolution = resolve_version(version, sdk.versions)
    errors = error_text or ""
    options = options_in(errors) + [o for o in options_in(query) if o not in options_in(errors)]
    search_text = " ".join(filter(None, [query, " ".join(options)]))
    # Research ranks named options by its own evidence and learns from its own feedback (and its
    # confidence is calibrated on the plain fused scores), so search's exact-identifier promotion
    # and learning from use stay out of it.
    results = lib.search(
        search_text,
        sdk_name=sdk.name,
        sdk_version=resolution.resolved,
        top_k=CANDIDATES,
        principal=caller,
        exact_identifiers=False,
        learned_from_use=False,
    )
    boosts = feedback_boosts(
        lib.sessions, sdk_name=sdk.name, error_text=errors, sdk_version=resolution.resolved
    )
    asked = f"{query}\n{errors}"
    # Error-driven ranking needs an entity that declares a named option; else the plain ranking.
    evidence = _rank_by_error_evidence(
        lib, results, options, errors, search_text, asked, boosts, caller.grants
    )
    kind = "error_driven" if evidence is not None else "plain"
    ranked = _best_chunk_per_entity(
        evidence if evidence is not None else _rerank(results, options, asked, boosts)
    )
    coverage = _coverage(lib, sdk.name, resolution.resolved, caller.grants, options, errors, ranked, evidence)
    snippets = _snippets(lib, ranked[:SNIPPETS], options)
    summary, summary_method = summarize(
        query,
        # section_path names a match that has no entity name; it is not returned to the caller.
        [{**s, "section_path": r.result.section_path} for s, r in zip(snippets, ranked, strict=False)],
        llm=lib.llm,
        error_text=error_text,
        sdk_name=sdk.name,
        version=resolution.resolved,
    )
    features = ranking_features(ranked, coverage.gap)
    score = confidence(features, kind) if features is not None else 0.0
    score, version_note = version_adjusted(score, version, resolution.resolved, resolution.exact)
    confidence_note = "; ".join(filter(None, [coverage.note(sdk.name), version_note])) or None
    kept, trimmed = fit(snippets, max_chars)
    response: dict[str, Any] = {
        "error": False,
        "sdk_name": sdk.name,
        "summary": summary,
        "summary_method": summary_method,
        "confidence_score": score,
        "confidence_note": confidence_note,
        "resolved_version": resolution.resolved,
        "version_note": resolution.note,
        "snippets": kept,
        "trimmed": trimmed,
        "fallback_suggestions": [],
        "confidence_features": asdict(features) if features is not None else None,
        # Which fitted model read the features: `error_driven` when an entity declares a named option.
        "confidence_model": kind,
    }
    if score < LOW_CONFIDENCE or not resolution.exact or not snippets:
        response["fallback_suggestions"] = _fallbacks(
            sdk.name, query, version, resolution.exact, resolution.resolved
        )
    if coverage.scopes and coverage.gap:
        program = coverage.scopes[0].split(" ", 1)[0]
        response["fallback_suggestions"].insert(
            0,
            f"index the rest of {program}: the source was limited to {', '.join(coverage.scopes)} "
            f"(`librarian ingest-cli {program} --sdk {sdk.name}` without --scope, or with the one needed)",
        )
    return response


def _coverage(
    lib: Librarian,
    sdk_name: str,
    version: str | None,
    grants: tuple[str, ...] | None,
    options: list[str],
    errors: str,
    ranked: list[_Ranked],
    evidence: list[_Ranked] | None,
) -> Coverage:
    """What the question names that a partial index lacks (:mod:`librarian.research.coverage`).

    Only an index known to be partial counts: a CLI source limited to some scopes. In a complete
    index, an option no command declares is the drift itself (the option was removed or renamed in
    this version), and its replacement is indexed, so it must not lower the confidence.
    """
    if not ranked:
        return Coverage()
    # The programs are those of the CLI commands found (``aws`` of ``s3 cp``): names the caller read.
    programs = list(
        dict.fromkeys(
            str(r.result.attributes["command"])
            for r in ranked[:CANDIDATES]
            if isinstance(r.result.attributes.get("command"), str)
        )
    )
    # Command lines are read from the error text only: a question's prose says "the aws cli".
    lines = command_lines(errors, programs)
    if not options and not lines:
        return Coverage()
    with lib.sessions() as session:
        scopes = indexed_scopes(session, [ranked[0].result.chunk_id])
        if not scopes:
            return Coverage()
        if evidence is not None:
            # Every entity declaring a named option competed in the evidence ranking.
            matched = [r.result for r in evidence if r.option_match]
            declared = {o for result in matched for o in options if _accepts_option(result, o)}
            missing_options = [o for o in options if o not in declared]
        elif options and declares_options(session, sdk_name, version, grants):
            missing_options = list(options)
        else:
            missing_options = []
        commands = missing_commands(session, sdk_name, version, grants, lines) if lines else []
    named = (len(options) if evidence is not None or missing_options else 0) + len(lines)
    return Coverage(named, tuple(missing_options), tuple(commands), scopes)


def _rerank(
    results: list[SearchResult],
    options: list[str],
    asked: str,
    boosts: dict[SnippetKey, FeedbackBoost] | None = None,
) -> list[_Ranked]:
    ranked = []
    for result in results:
        option_match = any(_accepts_option(result, option) for option in options)
        entity_match = _entity_named(result, asked)
        feedback = (boosts or {}).get(SnippetKey(result.source_url, result.entity_name))
        score = (
            result.score
            + (OPTION_BOOST if option_match else 0.0)
            + (ENTITY_BOOST if entity_match else 0.0)
            + (feedback.boost if feedback is not None else 0.0)
        )
        ranked.append(_Ranked(result, score, option_match, entity_match, feedback))
    # Two stable sorts: by score, and among equal scores the fresher source first.
    ranked.sort(key=lambda r: r.result.last_fetched_at, reverse=True)
    ranked.sort(key=lambda r: -r.score)
    return ranked


def _rank_by_error_evidence(
    lib: Librarian,
    results: list[SearchResult],
    options: list[str],
    errors: str,
    search_text: str,
    asked: str,
    boosts: dict[SnippetKey, FeedbackBoost],
    grants: tuple[str, ...] | None,
) -> list[_Ranked] | None:
    """Rank entities when the question or error names options (see :mod:`error_evidence`).

    Every entity declaring one of the options competes, not only those the hybrid search returned;
    each is scored by its best chunk's cosine similarity to the question (one absolute scale for
    all), plus the option boost scaled by how well the given value fits the option's documentation.
    None when no option is named or no entity declares one.
    """
    if not options or not results or results[0].sdk_name is None:
        return None
    sdk, version = results[0].sdk_name, results[0].sdk_version
    # Hits the vector index scored keep its cosine; acceptors (and keyword-only hits) are compared
    # with the question through the embedding cache, on the same scale.
    known = {r.chunk_id: r for r in results}
    best: dict[tuple[str | None, str], tuple[int, float]] = {}

    def consider(key: tuple[str | None, str], chunk_id: int, cosine: float) -> None:
        if key not in best or cosine > best[key][1]:
            best[key] = (chunk_id, cosine)

    for r in results:
        if r.vector_score is not None:
            consider((r.entity_name, r.source_url), r.chunk_id, r.vector_score)
    with lib.sessions() as session:
        acceptors = lib.acceptors.acceptors(session, sdk, version, options, grants)
        if not acceptors:
            return None
        keyword_only = [
            ChunkRef(c.id, c.entity_name, c.source_url, c.content_hash, c.content)
            for c in repository.chunks_by_ids(
                session, [r.chunk_id for r in results if r.vector_score is None]
            ).values()
        ]
        query_vector = lib.cache.embed_query(search_text)
        for key, (ref, cosine) in best_chunk_by_similarity(
            lib.cache, [*acceptors, *keyword_only], query_vector
        ).items():
            consider(key, ref.id, cosine)
        loaded = repository.chunks_by_ids(session, [i for i, _ in best.values() if i not in known])
    pages: dict[tuple[str | None, str], list[str]] = {}
    for ref in acceptors:
        pages.setdefault((ref.entity_name, ref.source_url), []).append(ref.content)
    values = option_values(errors, options)
    ranked = []
    for key, (chunk_id, cosine) in best.items():
        hit = known.get(chunk_id)
        chunk = loaded.get(chunk_id)
        if hit is not None:
            result = replace(hit, score=round(cosine, 6))
        elif chunk is not None:
            result = search_result(chunk, cosine, cosine, None)
        else:  # deleted since it was read
            continue
        accepted = [o for o in options if _accepts_option(result, o)]
        fit = (
            sum(option_fit(values.get(o), option_docs(pages.get(key, [result.content]), o)) for o in accepted)
            / len(accepted)
            if accepted
            else 0.0
        )
        entity_match = _entity_named(result, asked)
        feedback = boosts.get(SnippetKey(result.source_url, result.entity_name))
        score = (
            cosine
            + OPTION_BOOST * fit
            + (ENTITY_BOOST if entity_match else 0.0)
            + (feedback.boost if feedback is not None else 0.0)
        )
        ranked.append(_Ranked(result, score, bool(accepted), entity_match, feedback, fit))
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


def ranking_features(ranked: list[_Ranked], coverage_gap: float = 0.0) -> RankingFeatures | None:
    """The features the confidence model reads from a ranking (None when nothing was found).

    ``coverage_gap`` is the share of options and commands named in the question that the index
    lacks (:class:`librarian.research.coverage.Coverage`).
    """
    if not ranked:
        return None
    top = ranked[0]
    runner_up = ranked[1].score if len(ranked) > 1 else 0.0
    return RankingFeatures(
        cosine=top.result.vector_score or 0.0,
        margin=max(0.0, top.score - runner_up),
        lexical=1.0 if top.result.lexical_score is not None else 0.0,
        option_match=(top.option_fit if top.option_fit is not None else 1.0) if top.option_match else 0.0,
        entity_match=1.0 if top.entity_match else 0.0,
        coverage_gap=coverage_gap,
    )


def _snippets(lib: Librarian, ranked: list[_Ranked], options: list[str]) -> list[dict[str, Any]]:
    ids = [r.result.chunk_id for r in ranked]
    with lib.sessions() as session:
        rows = session.execute(
            select(Chunk.id, Source.kind, Chunk.document_id)
            .join(Document, Document.id == Chunk.document_id)
            .join(Source, Source.id == Document.source_id)
            .where(Chunk.id.in_(ids))
        ).all()
        kinds = {row[0]: row[1] for row in rows}
        documents = {row[0]: row[2] for row in rows}
        evidence = {
            r.result.chunk_id: _option_lines(session, documents[r.result.chunk_id], options, r.result.content)
            for r in ranked
            if r.option_match and r.result.chunk_id in documents
        }
    snippets = []
    for r in ranked:
        lines = evidence.get(r.result.chunk_id, [])
        # The option the error named is the evidence that this entity is the fix: when the best
        # chunk is an example or a description, quote the option's own line from the same page.
        content = "\n\n".join([r.result.content, *lines]) if lines else r.result.content
        snippets.append(
            {
                "content": content,
                "source_url": r.result.source_url,
                "sdk_version": r.result.sdk_version,
                "entity_name": r.result.entity_name,
                "entity_type": r.result.entity_type,
                "last_fetched_at": r.result.last_fetched_at,
                "score": round(r.score, 4),
                "trust_level": trust_level(kinds.get(r.result.chunk_id)),
                "flags": injection_flags(content),
                "matched_options": [o for o in options if _accepts_option(r.result, o)]
                if r.option_match
                else [],
                # Structured facts from the connector (a command's options and synopsis), so a
                # corrector can build a command from the snippet without re-parsing its text.
                "attributes": r.result.attributes,
                # How recorded feedback on this or a similar error moved the snippet (feedback.py).
                **({"feedback": r.feedback.to_dict()} if r.feedback is not None else {}),
            }
        )
    return snippets


def _option_lines(session: Session, document_id: int, options: list[str], shown: str) -> list[str]:
    """The lines of the same document that document ``options`` not already in ``shown``."""
    missing = [o for o in options if not _mentions(shown, o)]
    if not missing:
        return []
    contents = session.scalars(
        select(Chunk.content).where(Chunk.document_id == document_id).order_by(Chunk.ordinal)
    ).all()
    found: list[str] = []
    for option in missing:
        line = next(
            (
                line.strip()
                for content in contents
                for line in content.splitlines()
                if _mentions(line, option) and line.lstrip().startswith(("-", "`", option))
            ),
            None,
        )
        if line:
            found.append(line[:600])
    return found


def _mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


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
