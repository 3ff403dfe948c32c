"""The facade: one object that wires every service from :class:`~librarian.config.Settings`.

Adapters (CLI, REST, MCP) call only this class. Heavy parts (the embedding model, the vector store)
are created on first use, so listing sources or printing stats never loads a model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from librarian.catalog.jobs import IngestJobs
from librarian.catalog.service import CatalogService
from librarian.config import Settings
from librarian.discovery.service import DiscoveryService
from librarian.embeddings.base import Embedder
from librarian.embeddings.cache import EmbeddingCache
from librarian.embeddings.factory import create_embedder
from librarian.errors import InvalidInputError, LibrarianError
from librarian.home import prepare_home
from librarian.incidents.learning import LearningService
from librarian.incidents.service import IncidentService
from librarian.incidents.solutions import SolutionService
from librarian.index.base import SearchFilter, VectorStore
from librarian.index.exact import ExactScopeSearch
from librarian.index.factory import create_vector_store
from librarian.index.hybrid import HybridRetriever
from librarian.index.lexical import create_lexical_index
from librarian.index.manager import Progress, VectorIndexManager
from librarian.ingest.facade import IngestMethods
from librarian.knowledge.access import (
    Principal,
    local_principal,
    require_store_administrator,
)
from librarian.knowledge.identity import IdentityService
from librarian.knowledge.learned_search import LearnedRanking
from librarian.knowledge.service import KnowledgeService
from librarian.llm import LLMClient, create_llm
from librarian.research.error_evidence import AcceptorCache
from librarian.research.sdks import canonical_sdk_name
from librarian.runbooks.service import RunbookService
from librarian.search_results import SearchResult, search_result
from librarian.storage import repository
from librarian.storage.database import open_database
from librarian.storage.models import IndexState, Source, as_utc
from librarian.urls import without_password
from librarian.workflows.host import RuntimeHost
from librarian.workflows.service import WorkflowService

logger = logging.getLogger(__name__)

__all__ = ["Librarian", "SearchResult", "search_result"]


class Librarian(IngestMethods):
    """The knowledge service: ingest documentation, search it, keep its indexes in step.

    Example:
        >>> lib = Librarian(Settings.load(home=Path("/tmp/lib")))  # doctest: +SKIP
        >>> lib.ingest("docs/", sdk_name="mytool", sdk_version="1.2")  # doctest: +SKIP
        >>> lib.search("how do I upload a file", sdk_name="mytool")[0].entity_name  # doctest: +SKIP
    """

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        """Open the store (migrating its schema) for ``settings``.

        Args:
            settings: the configuration.
            embedder: an already loaded embedder to share (tests, benchmarks, long-lived servers);
                by default the one ``settings`` name is created on first use.
        """
        self.settings = settings
        self._embedder = embedder
        prepare_home(settings.home)
        self.engine: Engine
        self.sessions: sessionmaker[Session]
        self.engine, self.sessions = open_database(settings.resolved_database_url)
        self._cache: EmbeddingCache | None = None
        self._vector_store: VectorStore | None = None
        self._vectors: VectorIndexManager | None = None
        self._lexical = create_lexical_index(self.engine)
        self._retriever: HybridRetriever | None = None
        self._llm: LLMClient | None = None
        self._llm_created = False
        self._llm_lock = threading.Lock()
        # Which entities declare which options, per SDK version (error-driven research).
        self.acceptors = AcceptorCache()
        self._wiring = threading.Lock()
        self._warm_up_started = False
        self._warm_up_done = threading.Event()
        # Who a call acts for when it names nobody: the implicit user of the local organisation.
        self.default_principal: Principal = local_principal()
        self.identity = IdentityService(self.sessions)
        self.knowledge = KnowledgeService(self)
        self.incidents = IncidentService(self)
        self.solutions = SolutionService(self)
        self.learning = LearningService(self)
        # One task runtime per facade, started on first use: REST/MCP workflows and runbook steps.
        self.runtime_host = RuntimeHost(self)
        self.workflows = WorkflowService(self)
        self.runbooks = RunbookService(self)
        self.discovery = DiscoveryService(self)
        self.catalog = CatalogService(self)
        self.jobs = IngestJobs(self)

    # -- wiring -------------------------------------------------------------------------------

    @property
    def cache(self) -> EmbeddingCache:
        """The embedding cache over the configured embedder (loads the model on first use)."""
        with self._wiring:  # two threads' first use must not load the model twice
            if self._cache is None:
                embedder = self._embedder or create_embedder(self.settings)
                self._cache = EmbeddingCache(embedder, self.sessions)
            return self._cache

    @property
    def vectors(self) -> VectorIndexManager:
        """The vector index manager over the configured vector store."""
        cache = self.cache
        with self._wiring:
            if self._vectors is None:
                self._vector_store = create_vector_store(self.settings.resolved_vector_url, self.engine)
                self._vectors = VectorIndexManager(
                    self._vector_store, cache, self.sessions, self.settings.index_namespace
                )
                # Catch up on index changes left pending (a crash, or a migration that queued every
                # chunk again) before the first search reads the index.
                self._vectors.apply_outbox()
            return self._vectors

    def warm_up(self) -> None:
        """Load the embedding model and open the vector index now instead of at the first search.

        The first search of a process otherwise pays for both (seconds on a small machine); a
        process that will answer when something fails, such as the self-correcting loop, calls this
        when it starts (in a background thread) so the answer is not delayed by it.
        """
        self._warm_up_started = True
        try:
            self.cache.embed_query("warm up")
            self.vectors.active()
        finally:
            self._warm_up_done.set()

    def start_warm_up(self) -> None:
        """Run :meth:`warm_up` in a background thread (errors are logged: the first search reports them)."""
        self._warm_up_started = True
        threading.Thread(target=self._warm_up_quietly, name="librarian-warm-up", daemon=True).start()

    @property
    def is_warm(self) -> bool:
        """Whether a warm-up has finished (successfully or not)."""
        return self._warm_up_done.is_set()

    def wait_until_warm(self, timeout: float | None = None) -> float:
        """Wait for a warm-up in progress to finish; the seconds waited (0 when none runs).

        Lets a caller tell the one-time cost of a process's first search (loading the model) apart
        from the cost of the search itself.
        """
        if not self._warm_up_started or self._warm_up_done.is_set():
            return 0.0
        started = time.perf_counter()
        self._warm_up_done.wait(timeout)
        return time.perf_counter() - started

    def _warm_up_quietly(self) -> None:
        try:
            self.warm_up()
        except LibrarianError as exc:
            logger.warning("could not warm up the documentation store: %s", exc.message)

    @property
    def retriever(self) -> HybridRetriever:
        """The hybrid retriever (long-lived: it keeps a worker thread and a cache of small scopes)."""
        if self._retriever is None:
            self._retriever = HybridRetriever(
                self.cache,
                self._lexical,
                ExactScopeSearch(
                    self.sessions,
                    self.settings.exact_search_max_chunks,
                    self.settings.exact_search_cache_vectors,
                ),
                vector_weight=self.settings.hybrid_vector_weight,
                candidates=self.settings.search_candidates,
                grants_of=self._chunk_grants,
                learned=LearnedRanking(
                    self.sessions,
                    self.cache,
                    weight=self.settings.search_learned_weight,
                    min_similarity=self.settings.search_learned_min_similarity,
                ),
                active_index=self.vectors.active,
            )
        return self._retriever

    def _chunk_grants(self, chunk_ids: Sequence[int]) -> dict[int, list[str]]:
        with self.sessions() as session:
            return repository.chunk_grants(session, chunk_ids)

    @property
    def llm(self) -> LLMClient | None:
        """The configured LLM, or None when ``llm_provider`` is ``none`` (created on first use).

        A misconfigured LLM (no URL or model) is logged once and treated as none: research must
        keep working without one.
        """
        with self._llm_lock:
            if not self._llm_created:
                self._llm_created = True
                try:
                    self._llm = create_llm(self.settings)
                except InvalidInputError as exc:
                    logger.warning("LLM disabled: %s", exc)
        return self._llm

    def close(self) -> None:
        """Release the database engine, the vector store, the LLM client and the retriever's thread.

        Background ingest jobs of this process stop first (they read ``interrupted`` and resume), then
        the task runtime's embedded workers (a workflow they leave running goes on at the next start).
        """
        self.jobs.close()
        self.runbooks.close()
        self.runtime_host.close()
        if self._llm is not None:
            self._llm.close()
        if self._retriever is not None:
            self._retriever.close()
        if self._vector_store is not None:
            self._vector_store.close()
        self.engine.dispose()

    def __enter__(self) -> Librarian:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- search -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        sdk_name: str | None = None,
        sdk_version: str | None = None,
        document_type: str | None = None,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        fetched_after: datetime | None = None,
        fetched_before: datetime | None = None,
        top_k: int = 10,
        principal: Principal | None = None,
        document_types: tuple[str, ...] = (),
        exact_identifiers: bool = True,
        learned_from_use: bool = True,
    ) -> list[SearchResult]:
        """Hybrid (vector + keyword) search over the chunks passing the filters, best first.

        Only chunks ``principal`` may read are searched (the filter is part of both retrievers'
        queries); by default the caller is the local organisation's implicit user. With
        ``exact_identifiers``, chunks holding a distinctive identifier of the query as written
        (an option, an error code, a dotted or snake_case name) come first, scored 1.0. With
        ``learned_from_use``, documents the caller's organisation marked helpful for a similar query
        rank higher (:mod:`librarian.knowledge.learned_search`; the ``search_learned_weight`` setting).

        Raises:
            InvalidInputError: an empty query or a ``top_k`` outside 1..1000.
            NotFoundError: ``sdk_name`` names no SDK the caller may read (aliases such as ``aws``
                for ``aws-cli`` resolve as research resolves them); the hint names the closest.
        """
        if not query.strip():
            raise InvalidInputError("the search query is empty")
        if not 1 <= top_k <= 1000:
            raise InvalidInputError(f"top_k must be between 1 and 1000, got {top_k}")
        if sdk_version is not None and sdk_name is None:
            raise InvalidInputError("a version filter needs an SDK name: versions belong to an SDK")
        caller = principal or self.default_principal
        if sdk_name is not None:
            with self.sessions() as session:
                sdk_name = canonical_sdk_name(session, sdk_name, caller.grants)
        where = SearchFilter(
            sdk_name=sdk_name,
            sdk_version=sdk_version,
            document_type=document_type,
            category=category,
            tags=tuple(tags),
            fetched_after=as_utc(fetched_after),
            fetched_before=as_utc(fetched_before),
            document_types=tuple(document_types),
            access=caller.grants,
        )
        hits = self.vectors.read(
            lambda index: self.retriever.retrieve(
                index,
                query,
                top_k,
                where,
                exact_identifiers=exact_identifiers,
                learned_for=caller.organization_id if learned_from_use else None,
            )
        )
        with self.sessions() as session:
            chunks = repository.chunks_by_ids(session, [hit.chunk_id for hit in hits])
        results = []
        for hit in hits:
            chunk = chunks.get(hit.chunk_id)
            if chunk is None:  # deleted between the index read and now
                continue
            results.append(
                search_result(chunk, hit.score, hit.vector_score, hit.lexical_score, hit.learned_similarity)
            )
        return results

    # -- maintenance ----------------------------------------------------------------------------

    def sources(self) -> list[dict[str, Any]]:
        """Every registered source with the outcome and errors of its last ingest run."""
        with self.sessions() as session:
            rows = session.scalars(select(Source).order_by(Source.id))
            return [
                {
                    "id": s.id,
                    "uri": s.uri,
                    "kind": s.kind,
                    "ref": s.ref,
                    "sdk_name": s.sdk_name,
                    "sdk_version": s.sdk_version,
                    "document_type": s.document_type,
                    "category": s.category,
                    "tags": list(s.tags or []),
                    "last_ingested_at": s.last_ingested_at.isoformat() if s.last_ingested_at else None,
                    "last_revision": s.last_revision,
                    "last_status": s.last_status,
                    "last_stats": dict(s.last_stats or {}),
                    "last_errors": list(s.last_errors or []),
                }
                for s in rows
            ]

    def stats(self, principal: Principal | None = None) -> dict[str, Any]:
        """Counts of the store and the state of the vector index.

        The counts cover every organisation and name the databases, so over REST and MCP only the
        operator and administrators of the local organisation (the server's own) may read them;
        ``principal`` is that caller (``None``: the operator on the server, as the CLI is).

        Raises:
            ForbiddenError: ``principal`` is neither.
        """
        if principal is not None:
            require_store_administrator(principal, "reading the store's statistics")
        with self.sessions() as session:
            result = repository.store_statistics(session)
            state = session.get(IndexState, "chunks")
            result["vector_index"] = (
                {
                    "collection": state.collection,
                    "model_version": state.model_version,
                    "dimension": state.dimension,
                    "built_at": state.built_at.isoformat(),
                }
                if state
                else None
            )
        result["database_url"] = self.engine.url.render_as_string(hide_password=True)
        result["vector_url"] = without_password(self.settings.resolved_vector_url)
        return result

    def reindex(self, progress: Progress | None = None) -> dict[str, object]:
        """Rebuild the vector index from the store with the configured embedding model.

        Searches keep using the old index until the new one is complete.
        """
        return self.vectors.rebuild(progress)
