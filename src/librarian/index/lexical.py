"""Lexical (keyword) search over the chunks table: FTS5 on SQLite, tsvector on PostgreSQL.

Both live in the relational store itself and are maintained in the same transaction as the chunks
(FTS5 by triggers, PostgreSQL by a generated column), so the lexical index is never out of step.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from librarian.errors import BackendUnavailableError
from librarian.index.base import SearchFilter
from librarian.index.query_terms import query_terms
from librarian.index.scope import any_of_groups, filter_tokens

# BM25 column weights: a hit in the entity name / section path counts more than one in the body.
TITLE_WEIGHT = 2.0
CONTENT_WEIGHT = 1.0


class LexicalIndex(Protocol):
    """Keyword search returning ``(chunk id, score)`` best first; higher scores are better."""

    def query(self, query: str, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """The ``k`` best keyword matches of ``query`` that pass ``where``."""
        ...

    def containing(self, literal: str, k: int, where: SearchFilter | None = None) -> list[int]:
        """Up to ``k`` chunks passing ``where`` whose title or text holds ``literal`` as written
        (case aside): the exact-identifier lookup of hybrid search."""
        ...


# The words of an identifier as both lexical indexes split it (letters and digits).
_WORDS = re.compile(r"[a-z0-9]+")


def _scoped(match: str, where: SearchFilter) -> str:
    """An FTS5 ``match`` restricted to the filter's scope tokens (values and access grants)."""
    scope = [f"search_scope : {token}" for token in filter_tokens(where)]
    scope += [f"search_scope : ({' OR '.join(group)})" for group in any_of_groups(where)]
    return " AND ".join([*scope, f"({match})"]) if scope else match


def _date_clauses(where: SearchFilter, params: dict[str, object], column: str) -> str:
    clauses = ""
    if where.fetched_after is not None:
        clauses += f" AND {column} >= :fetched_after"
        params["fetched_after"] = where.fetched_after
    if where.fetched_before is not None:
        clauses += f" AND {column} <= :fetched_before"
        params["fetched_before"] = where.fetched_before
    return clauses


# Chunks the matching terms may select (as PostgreSQL's planner estimates it, as SQLite counts it)
# before the rarest terms alone are used to find candidates. On PostgreSQL, ranking every match of a
# common word read 38,577 of 100,000 chunks in a sequential scan (51 ms); a few thousand come from the
# GIN index.
MAX_ESTIMATED_MATCHES = 5000


class Fts5LexicalIndex:
    """SQLite FTS5 with the porter stemmer; BM25 ranking; filters folded into the MATCH.

    As on PostgreSQL, candidates come from the query's *selective* terms: each term's matches under
    the filter are counted (stopping at :data:`MAX_ESTIMATED_MATCHES`, a fraction of a millisecond a
    term), and the rarest terms are kept while their matches stay under that budget. Ranking every
    chunk that holds a common word is what made an unfiltered search of 100,000 chunks spend about
    80 ms in BM25; a store whose terms all stay under the budget (most stores, and every filtered
    search of a large one) keeps every term.
    """

    def __init__(self, engine: Engine, *, max_estimated_matches: int = MAX_ESTIMATED_MATCHES) -> None:
        self._engine = engine
        self._budget = max_estimated_matches

    def query(self, query: str, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """Chunks matching any of the query's selective terms, ranked by BM25 on those terms."""
        where = where or SearchFilter()
        terms = query_terms(query)
        if not terms:
            return []
        any_term = " OR ".join(f'"{term}"' for term in self._selective(terms, where))
        match = _scoped(f"{{search_title content}} : ({any_term})", where)
        params: dict[str, object] = {"match": match, "k": k}
        sql = (
            f"SELECT chunks_fts.rowid, bm25(chunks_fts, {TITLE_WEIGHT}, {CONTENT_WEIGHT}, 0.0) AS rank "
            "FROM chunks_fts "
        )
        dates = ""
        if where.fetched_after is not None or where.fetched_before is not None:
            sql += "JOIN chunks ON chunks.id = chunks_fts.rowid "
            dates = _date_clauses(where, params, "chunks.last_fetched_at")
            # SQLite stores DateTime as ISO text without a zone; compare like with like.
            for key in ("fetched_after", "fetched_before"):
                if key in params:
                    params[key] = params[key].strftime("%Y-%m-%d %H:%M:%S.%f")  # type: ignore[attr-defined]
        sql += f"WHERE chunks_fts MATCH :match{dates} ORDER BY rank LIMIT :k"
        rows = _fetch(self._engine, sql, params)
        return [(int(row[0]), -float(row[1])) for row in rows]

    def _selective(self, terms: list[str], where: SearchFilter) -> list[str]:
        """The rarest terms whose matches under ``where`` stay under the budget (at least one)."""
        if len(terms) == 1:
            return terms
        # Counting stops one past the budget: a common word costs as little as a rare one.
        sql = text("SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH :match LIMIT :cap)")
        counts: list[tuple[float, str]] = []
        try:
            with self._engine.connect() as connection:
                for term in terms:
                    match = _scoped(f'{{search_title content}} : "{term}"', where)
                    found = connection.execute(sql, {"match": match, "cap": self._budget + 1}).scalar_one()
                    counts.append((float(found), term))
        except SQLAlchemyError as exc:
            raise BackendUnavailableError(f"lexical search failed: {exc}") from exc
        return _rarest_within(counts, self._budget)

    def containing(self, literal: str, k: int, where: SearchFilter | None = None) -> list[int]:
        """Chunks whose words form ``literal``'s words as a phrase, then hold it exactly."""
        where = where or SearchFilter()
        words = _WORDS.findall(literal.lower())
        if not words:
            return []
        phrase = " ".join(words)
        params: dict[str, object] = {
            "match": _scoped(f'{{search_title content}} : "{phrase}"', where),
            "literal": literal.lower(),
            "k": k,
        }
        dates = _date_clauses(where, params, "chunks.last_fetched_at")
        for key in ("fetched_after", "fetched_before"):
            if key in params:
                params[key] = params[key].strftime("%Y-%m-%d %H:%M:%S.%f")  # type: ignore[attr-defined]
        sql = (
            "SELECT chunks.id FROM chunks_fts JOIN chunks ON chunks.id = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH :match{dates} AND (instr(lower(chunks.content), :literal) > 0 "
            "OR instr(lower(chunks.search_title), :literal) > 0) ORDER BY chunks.id LIMIT :k"
        )
        return [int(row[0]) for row in _fetch(self._engine, sql, params)]


class PostgresLexicalIndex:
    """PostgreSQL full-text search on the generated ``search_vector`` column (GIN index).

    Candidates are the chunks matching any of the query's *selective* terms: the terms are ordered
    by how many chunks the planner expects each to match (its statistics of the column's most common
    words, read with ``EXPLAIN``, about a tenth of a millisecond a term), and the rarest are kept
    while their expected matches stay under :data:`MAX_ESTIMATED_MATCHES` (the rarest always). The
    candidates are ranked by ``ts_rank`` against every term. A chunk matching only very common words
    is thus left to the vector side of hybrid search, which is what keeps PostgreSQL from ranking a
    third of the table for a question full of common words.
    """

    def __init__(self, engine: Engine, *, max_estimated_matches: int = MAX_ESTIMATED_MATCHES) -> None:
        self._engine = engine
        self._budget = max_estimated_matches

    def query(self, query: str, k: int, where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """Chunks matching any of the query's selective terms, ranked by ``ts_rank`` on all terms."""
        where = where or SearchFilter()
        terms = query_terms(query)
        if not terms:
            return []
        params: dict[str, object] = {
            "tsquery": " | ".join(terms),
            "match": " | ".join(self._selective(terms)),
            "k": k,
        }
        clauses = _pg_clauses(where, params)
        sql = (
            "SELECT id, ts_rank(search_vector, q) AS rank "
            "FROM chunks, to_tsquery('english', :tsquery) AS q, to_tsquery('english', :match) AS m "
            f"WHERE search_vector @@ m{clauses} ORDER BY rank DESC, id LIMIT :k"
        )
        rows = _fetch(self._engine, sql, params)
        return [(int(row[0]), float(row[1])) for row in rows]

    def containing(self, literal: str, k: int, where: SearchFilter | None = None) -> list[int]:
        """Chunks whose search vector holds ``literal``'s words as a phrase, then hold it exactly."""
        where = where or SearchFilter()
        words = _WORDS.findall(literal.lower())
        if not words:
            return []
        params: dict[str, object] = {"phrase": " ".join(words), "literal": literal.lower(), "k": k}
        clauses = _pg_clauses(where, params)
        sql = (
            "SELECT id FROM chunks WHERE search_vector @@ phraseto_tsquery('english', :phrase)"
            f"{clauses} AND (strpos(lower(content), :literal) > 0 "
            "OR strpos(lower(search_title), :literal) > 0) ORDER BY id LIMIT :k"
        )
        return [int(row[0]) for row in _fetch(self._engine, sql, params)]

    def _selective(self, terms: list[str]) -> list[str]:
        """The rarest terms whose expected matches stay under the budget (at least one)."""
        if len(terms) == 1:
            return terms
        estimates = []
        try:
            with self._engine.connect() as connection:
                # PostgreSQL's own stop words match nothing: a query of them alone must not be chosen.
                searchable = (
                    connection.execute(
                        text(
                            "SELECT term FROM unnest(CAST(:terms AS text[])) AS term "
                            "WHERE numnode(to_tsquery('english', term)) > 0"
                        ),
                        {"terms": terms},
                    )
                    .scalars()
                    .all()
                )
                for term in searchable:
                    plan = connection.execute(
                        text(
                            "EXPLAIN (FORMAT JSON) SELECT 1 FROM chunks "
                            "WHERE search_vector @@ to_tsquery('english', :term)"
                        ),
                        {"term": term},
                    ).scalar_one()
                    estimates.append((float(plan[0]["Plan"]["Plan Rows"]), term))
        except SQLAlchemyError as exc:
            raise BackendUnavailableError(f"lexical search failed: {exc}") from exc
        if not estimates:
            return terms
        return _rarest_within(estimates, self._budget)


def _rarest_within(estimates: list[tuple[float, str]], budget: int) -> list[str]:
    """Terms rarest first, while their expected matches together stay within ``budget`` (one at least)."""
    chosen: list[str] = []
    expected = 0.0
    for rows, term in sorted(estimates):
        if chosen and expected + rows > budget:
            break
        chosen.append(term)
        expected += rows
    return chosen


def _pg_clauses(where: SearchFilter, params: dict[str, object]) -> str:
    """The filter as SQL conditions on ``chunks`` (PostgreSQL), parameters added to ``params``."""
    clauses = ""
    for field in ("sdk_name", "sdk_version", "document_type", "category"):
        value = getattr(where, field)
        if value is not None:
            clauses += f" AND {field} = :{field}"
            params[field] = value
    if where.tags:
        clauses += " AND tags @> CAST(:tags AS jsonb)"
        params["tags"] = _json_list(where.tags)
    if where.document_types:
        clauses += " AND document_type = ANY(:document_types)"
        params["document_types"] = sorted(set(where.document_types))
    if where.access is not None:
        # jsonb_exists_any is the function behind ``access_grants ?| grants`` (any of the caller's
        # grants): the same test, written so the planner cannot answer it from the GIN index on
        # access_grants. The search terms already bound the candidates to a few thousand chunks
        # (MAX_ESTIMATED_MATCHES), which are cheap to test row by row; the operator made the planner
        # AND them with a bitmap of every chunk the caller may read (38,620 of 100,000 for a member
        # of one organisation, 3 ms), which doubled the lexical query.
        clauses += " AND jsonb_exists_any(access_grants, CAST(:grants AS text[]))"
        params["grants"] = sorted(set(where.access))
    clauses += _date_clauses(where, params, "last_fetched_at")
    return clauses


def _fetch(engine: Engine, sql: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql), params)]
    except SQLAlchemyError as exc:
        raise BackendUnavailableError(f"lexical search failed: {exc}") from exc


def _json_list(values: tuple[str, ...]) -> str:
    return json.dumps(list(values))


def create_lexical_index(engine: Engine) -> LexicalIndex:
    """The lexical index native to ``engine``'s database."""
    if engine.dialect.name == "postgresql":
        return PostgresLexicalIndex(engine)
    return Fts5LexicalIndex(engine)
