"""The ingest pipeline: list -> read -> skip unchanged -> parse -> chunk -> embed -> store -> index.

Embedding runs in batches that span documents (the embedder is the bottleneck and wants large
batches), while every document is written in its own transaction, so an interrupted ingest leaves a
consistent store that the next run completes: finished documents are skipped by content hash and
pending vector-index updates are applied from the outbox.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from librarian.config import Settings
from librarian.embeddings.cache import EmbeddingCache, content_hash
from librarian.errors import LibrarianError
from librarian.index.manager import VectorIndexManager, embedding_text
from librarian.ingest.chunking import chunk_document
from librarian.ingest.parsed import ChunkDraft, ParseError
from librarian.ingest.parsers.registry import is_probably_binary, parse_document
from librarian.ingest.sources.base import SourceDocument, SourceFile, SourceListing, SourceProblem
from librarian.ingest.sources.git import GitCheckout
from librarian.ingest.sources.git_access import GitAccess
from librarian.ingest.sources.local import list_local
from librarian.storage import repository
from librarian.storage.models import Source, utcnow

# Chunks embedded per batch: large enough to keep the model busy, small enough to commit often.
EMBED_BATCH_CHUNKS = 256


@dataclass
class IngestReport:
    """What one ingest run did. ``status``: ok, partial (some files failed), failed, unchanged."""

    source_id: int | None
    uri: str
    status: str = "ok"
    revision: str | None = None
    files_seen: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0
    problems: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


@dataclass
class _Prepared:
    path: str
    url: str
    raw_hash: str
    text: str
    title: str | None
    chunks: list[repository.NewChunk]
    is_new: bool


ProgressCallback = Callable[[str, int, int], None]


class IngestStopped(Exception):
    """Raised by a progress callback to stop an ingest between two files (a cancelled job).

    What was written until then stays: each file is its own transaction, and the run is recorded
    on its source as ``interrupted``.
    """


class IngestPipeline:
    """Runs ingests of sources into the store and the indexes."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        cache: EmbeddingCache,
        vectors: VectorIndexManager,
    ) -> None:
        self._settings = settings
        self._sessions = sessions
        self._cache = cache
        self._vectors = vectors

    def run(
        self,
        spec: repository.SourceSpec,
        progress: ProgressCallback | None = None,
        lister: Callable[[], SourceListing] | None = None,
    ) -> IngestReport:
        """Ingest ``spec``; problems with single files are reported, never fatal.

        Raises:
            LibrarianError: the source as a whole cannot be listed (missing folder, bad git URL); the
                failure is recorded on the source first, so ``librarian sources`` shows it.
        """
        started = time.perf_counter()
        self._vectors.apply_outbox()  # finish what an interrupted run left
        with self._sessions.begin() as session:
            source = repository.get_or_create_source(session, spec)
            source_id, stored_options = source.id, dict(source.options or {})
        report = IngestReport(source_id=source_id, uri=spec.uri)
        try:
            listing = lister() if lister is not None else self._list(spec, stored_options)
        except LibrarianError as exc:
            report.status = "failed"
            report.problems.append({"path": spec.uri, "reason": str(exc)})
            self._record(source_id, report, None)
            raise
        report.revision = listing.revision
        report.files_seen = len(listing.files) + len(listing.documents) + len(set(listing.unchanged_paths))
        report.problems.extend(_problem(p) for p in listing.problems)
        embedded_before = self._cache.embedded_count
        try:
            self._ingest_listing(source_id, spec, listing, report, progress)
        except (KeyboardInterrupt, IngestStopped):
            report.status = "interrupted"
            self._record(source_id, report, None)
            raise
        except LibrarianError as exc:  # e.g. the embeddings endpoint or vector server went away
            report.status = "failed"
            report.problems.append({"path": spec.uri, "reason": str(exc)})
            self._record(source_id, report, None)
            raise
        report.failed = len(report.problems)
        report.chunks_embedded = self._cache.embedded_count - embedded_before
        if report.status == "ok":
            changed = report.added + report.updated + report.deleted
            report.status = "partial" if report.problems else ("ok" if changed else "unchanged")
        report.seconds = round(time.perf_counter() - started, 3)
        self._record(source_id, report, listing.revision)
        return report

    def _list(self, spec: repository.SourceSpec, options: dict[str, Any]) -> SourceListing:
        if spec.kind == "git":
            # The access the source was added with (an API caller's stays an API caller's).
            access = GitAccess.from_options(options.get("git_access"))
            checkout = GitCheckout(self._settings.home / "git", self._settings.git_timeout_seconds, access)
            return checkout.list(spec.uri, spec.ref)
        return list_local(Path(spec.uri))

    def _ingest_listing(
        self,
        source_id: int,
        spec: repository.SourceSpec,
        listing: SourceListing,
        report: IngestReport,
        progress: ProgressCallback | None,
    ) -> None:
        with self._sessions() as session:
            live = repository.live_documents(session, source_id)
            known = {path: doc.content_hash for path, doc in live.items()}
            validators = {path: (doc.etag, doc.last_modified) for path, doc in live.items()}
        # Documents the source vouches for without re-reading them (HTTP 304) are unchanged as stored.
        report.unchanged += len({path for path in listing.unchanged_paths if path in known})
        batch: list[_Prepared] = []
        batch_chunks = 0
        items: list[SourceFile | SourceDocument] = [*listing.files, *listing.documents]
        total = len(items)
        for done, item in enumerate(items, start=1):
            if isinstance(item, SourceFile):
                prepared = self._prepare_file(item, known, report)
            else:
                prepared = self._prepare_document(item, known, report)
            if prepared is not None:
                batch.append(prepared)
                batch_chunks += len(prepared.chunks)
                if batch_chunks >= EMBED_BATCH_CHUNKS:
                    self._write(source_id, batch, report)
                    batch, batch_chunks = [], 0
            if progress:
                progress("files", done, total)
        self._write(source_id, batch, report)
        self._store_validators(source_id, listing.documents, validators)
        # A file that failed this time keeps its stored chunks: only files truly gone are deleted.
        listed = (
            {f.path for f in listing.files}
            | {d.path for d in listing.documents}
            | {p.path for p in listing.problems}
            | set(listing.unchanged_paths)
        )
        # A folder that could not be read hides its files; they are not gone.
        unreadable = tuple("" if p.path == "." else p.path.rstrip("/") + "/" for p in listing.problems)
        gone = [path for path in known if path not in listed and not path.startswith(unreadable)]
        if gone:
            now = utcnow()
            with self._sessions.begin() as session:
                for path in gone:
                    document = repository.find_document(session, source_id, path)
                    if document is not None:
                        repository.mark_deleted(session, document, now)
            report.deleted += len(gone)
        self._vectors.apply_outbox()

    def _store_validators(
        self,
        source_id: int,
        documents: list[SourceDocument],
        stored: dict[str, tuple[str | None, str | None]],
    ) -> None:
        """Keep each document's HTTP validators (ETag, Last-Modified) for the next conditional fetch.

        Also for documents whose content hash was unchanged: a page can get a new ETag for the same text.
        """
        changed = [d for d in documents if stored.get(d.path, (None, None)) != (d.etag, d.last_modified)]
        if not changed:
            return
        with self._sessions.begin() as session:
            for item in changed:
                document = repository.find_document(session, source_id, item.path)
                if document is not None:
                    document.etag, document.last_modified = item.etag, item.last_modified

    def _prepare_document(
        self, document: SourceDocument, known: dict[str, str | None], report: IngestReport
    ) -> _Prepared | None:
        canonical = json.dumps([document.text, document.metadata], sort_keys=True, default=str)
        raw_hash = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        if known.get(document.path) == raw_hash:
            report.unchanged += 1
            return None
        drafts = chunk_document(document.parsed, max_chars=self._settings.chunk_max_chars)
        return _Prepared(
            path=document.path,
            url=document.url,
            raw_hash=raw_hash,
            text=document.text,
            title=document.parsed.title,
            chunks=new_chunks(drafts, document.metadata),
            is_new=document.path not in known,
        )

    def _prepare_file(
        self, file: SourceFile, known: dict[str, str | None], report: IngestReport
    ) -> _Prepared | None:
        try:
            size = file.absolute_path.stat().st_size
            if size > self._settings.max_file_bytes:
                raise ParseError(
                    f"file is {size} bytes, over the limit of {self._settings.max_file_bytes} "
                    "(raise LIBRARIAN_MAX_FILE_BYTES to ingest it)"
                )
            data = file.absolute_path.read_bytes()
        except OSError as exc:
            report.problems.append({"path": file.path, "reason": f"cannot read: {exc.strerror or exc}"})
            return None
        except ParseError as exc:
            report.problems.append({"path": file.path, "reason": str(exc)})
            return None
        raw_hash = hashlib.sha256(data).hexdigest()
        if known.get(file.path) == raw_hash:
            report.unchanged += 1
            return None
        try:
            if is_probably_binary(data):
                raise ParseError("binary content, not a document")
            parsed = parse_document(file.path, data)
            drafts = chunk_document(
                parsed,
                max_chars=self._settings.chunk_max_chars,
                default_entity_type=str(parsed.metadata.get("entity_type") or "section"),
            )
        except ParseError as exc:
            report.problems.append({"path": file.path, "reason": str(exc)})
            return None
        chunks = new_chunks(drafts, {})
        text = (
            data.decode("utf-8", errors="replace")
            if not file.path.lower().endswith(".pdf")
            else ("\n\n".join(section.text for section in parsed.sections))
        )
        return _Prepared(
            path=file.path,
            url=file.url,
            raw_hash=raw_hash,
            text=text,
            title=parsed.title,
            chunks=chunks,
            is_new=file.path not in known,
        )

    def _write(self, source_id: int, batch: list[_Prepared], report: IngestReport) -> None:
        if not batch:
            return
        # Embed the whole batch at once; the vectors land in the cache the index update reads.
        texts = [
            embedding_text(c.entity_name, c.section_path, c.content)
            for prepared in batch
            for c in prepared.chunks
        ]
        self._cache.embed_documents(texts)
        model = self._cache.embedder.model_version
        for prepared in batch:
            with self._sessions.begin() as session:
                source = session.get(Source, source_id)
                assert source is not None
                repository.store_document_version(
                    session,
                    source,
                    path=prepared.path,
                    source_url=prepared.url,
                    title=prepared.title,
                    raw_hash=prepared.raw_hash,
                    text=prepared.text,
                    chunks=prepared.chunks,
                    embedding_model_version=model,
                    fetched_at=utcnow(),
                )
            report.chunks_written += len(prepared.chunks)
            if prepared.is_new:
                report.added += 1
            else:
                report.updated += 1
        self._vectors.apply_outbox()

    def _record(self, source_id: int, report: IngestReport, revision: str | None) -> None:
        stats = {
            key: getattr(report, key)
            for key in ("files_seen", "added", "updated", "unchanged", "deleted", "failed", "chunks_written")
        }
        with self._sessions.begin() as session:
            source = session.get(Source, source_id)
            if source is not None:
                repository.record_run(
                    session,
                    source,
                    status=report.status,
                    errors=report.problems,
                    stats=stats,
                    revision=revision,
                )


def new_chunks(drafts: list[ChunkDraft], attributes: dict[str, Any]) -> list[repository.NewChunk]:
    """Chunks ready to store from the chunker's drafts (the content hash is of the embedded text)."""
    chunks = []
    for ordinal, draft in enumerate(drafts):
        section_path = " > ".join(draft.section_path)
        chunks.append(
            repository.NewChunk(
                ordinal=ordinal,
                entity_name=draft.entity_name,
                entity_type=draft.entity_type,
                section_path=section_path,
                content=draft.content,
                content_hash=content_hash(embedding_text(draft.entity_name, section_path, draft.content)),
                attributes=attributes,
            )
        )
    return chunks


def _problem(problem: SourceProblem) -> dict[str, str]:
    return {"path": problem.path, "reason": problem.reason}
