"""MCP tools of organisational knowledge, with the design's names and schemas: ``search_knowledge``,
``get_document`` and ``record_knowledge_feedback``; and the rest of what the CLI and REST do with
documents: add, update, delete, list them, list a document's versions and restore one."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from librarian.app import Librarian
from librarian.knowledge.documents import DocumentDraft
from librarian.knowledge.search import KnowledgeFilters
from librarian.mcp.caller import tool_caller
from librarian.mcp.errors import tool_errors
from librarian.mcp.metadata import WRITES


def register_knowledge_tools(server: MCPServer[Any], lib: Librarian) -> None:
    """Add the knowledge tools to ``server``."""

    @server.tool()
    def search_knowledge(
        query: str,
        filters: dict[str, Any] | None = None,
        limit: int = 10,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Search the organisation's knowledge base (runbooks, incident reports, solutions, wikis,
        documentation) in natural language; results are the documents you may read, best first.

        Args:
            query: what you are looking for, e.g. "pod OOMKilled after deploy".
            filters: optional, any of: document_type (list of runbook, incident_report,
                documentation, wiki, solution, sdk_reference, document), category, tags (all must
                match), created_after / created_before (ISO dates), severity (list of critical, high,
                medium, low), min_usefulness_score (0-5), sdk_name.
            limit: how many documents (1-50, default 10).

        Returns:
            `results`: each with id, title, document_type, category, relevance_score, score,
            snippet and highlights ([start, end) of matched terms in the snippet), last_used,
            usefulness_score, flags (outdated / incorrect votes: double-check such a document) and
            url. Read a whole document with get_document(id). When one answered your question,
            record_knowledge_feedback(id, "helpful", search_query=query) makes it rank higher for
            your organisation's similar searches.
        """
        with tool_errors():
            parsed = KnowledgeFilters.from_mapping(filters)
            principal = tool_caller(lib, ctx)
            return {"results": lib.knowledge.search(query, filters=parsed, limit=limit, principal=principal)}

    @server.tool()
    def get_document(
        document_id: int, version: int | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Read a whole knowledge document by id (as search_knowledge returned it), with its content.

        Args:
            document_id: the document's id.
            version: an earlier version (default: the current one).

        Returns:
            The document's fields (title, document_type, category, tags, version, visibility,
            usefulness_score, flags, url...) and `content`.
        """
        with tool_errors():
            return lib.knowledge.documents.get(tool_caller(lib, ctx), document_id, version)

    @server.tool()
    def add_document(
        title: str,
        content: str,
        document_type: str = "documentation",
        category: str | None = None,
        tags: list[str] | None = None,
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        description: str | None = None,
        severity: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Add a knowledge document (version 1); it is searchable as soon as this returns.

        Args:
            title: the document's title.
            content: Markdown.
            document_type: runbook, incident_report, documentation (default), wiki or solution.
            category: e.g. kubernetes, database.
            tags: labels.
            visibility: private, teams (with allowed_teams), organization (default), or public
                (administrators only).
            allowed_teams: team names or ids that may read it (with visibility "teams").
            description: a one-line summary shown in results.
            severity: for incident reports and runbooks: low, medium, high or critical.

        Returns:
            The document's fields, with its `id` and `version`.
        """
        with tool_errors():
            draft = DocumentDraft(
                title=title,
                content=content,
                document_type=document_type,
                category=category,
                tags=tuple(tags or ()),
                visibility=visibility,
                allowed_teams=tuple(allowed_teams) if allowed_teams else None,
                description=description,
                severity=severity,
            )
            return lib.knowledge.documents.create(tool_caller(lib, ctx), draft)

    @server.tool()
    def update_document(
        document_id: int,
        base_version: int,
        title: str | None = None,
        content: str | None = None,
        document_type: str | None = None,
        category: str | None = None,
        tags: list[str] | None = None,
        visibility: str | None = None,
        allowed_teams: list[str] | None = None,
        description: str | None = None,
        severity: str | None = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Save a new version of a knowledge document; fields left out keep their value.

        Args:
            document_id: the document's id.
            base_version: the version you read (get_document's `version`); if someone saved a newer
                one meanwhile the edit is refused as a conflict: read it again and redo the edit.
            title: a new title.
            content: new Markdown content.
            document_type: runbook, incident_report, documentation, wiki or solution.
            category: a new category.
            tags: the new tags (replacing the old ones).
            visibility: who may read it from now on: private, teams (with allowed_teams),
                organization, or public (administrators only). Only its creator or an administrator
                may change it.
            allowed_teams: team names or ids that may read it (with visibility "teams").
            description: a new one-line summary.
            severity: low, medium, high or critical.

        Returns:
            The document's fields at the new version.
        """
        with tool_errors():
            draft = DocumentDraft(
                title=title,
                content=content,
                document_type=document_type,
                category=category,
                tags=None if tags is None else tuple(tags),
                visibility=visibility,
                allowed_teams=None if allowed_teams is None else tuple(allowed_teams),
                description=description,
                severity=severity,
            )
            return lib.knowledge.documents.update(tool_caller(lib, ctx), document_id, base_version, draft)

    @server.tool()
    def delete_document(
        document_id: int, base_version: int | None = None, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Remove a knowledge document from search; its versions stay in the history.

        Args:
            document_id: the document's id.
            base_version: refuse if the document is no longer at this version.
        """
        with tool_errors():
            return lib.knowledge.documents.delete(tool_caller(lib, ctx), document_id, base_version)

    @server.tool(title="List knowledge documents")
    def list_documents(
        document_type: str | None = None, after_id: int = 0, limit: int = 50, ctx: Context | None = None
    ) -> dict[str, Any]:
        """List the knowledge documents you may read, by id, without their content.

        Args:
            document_type: only this type, e.g. "runbook", "postmortem", "how-to".
            after_id: the next_after_id of the previous page.
            limit: how many (1-500).

        Returns:
            {"documents": [{id, title, document_type, category, tags, version, visibility, ...}],
            "next_after_id": <id> or null}.
        """
        with tool_errors():
            documents = lib.knowledge.documents.list_documents(
                tool_caller(lib, ctx), document_type=document_type, limit=limit, after_id=after_id
            )
            return {
                "documents": documents,
                "next_after_id": documents[-1]["id"] if len(documents) == limit else None,
            }

    @server.tool(title="List a document's versions")
    def list_document_versions(document_id: int, ctx: Context | None = None) -> dict[str, Any]:
        """Every version of a knowledge document, newest first, without content (read one with get_document).

        Args:
            document_id: the document's id.

        Returns:
            {"versions": [{version, version_created_at, version_created_by, version_title, content_hash}]}.
        """
        with tool_errors():
            return {"versions": lib.knowledge.documents.history(tool_caller(lib, ctx), document_id)}

    @server.tool(title="Restore a document version", annotations=WRITES)
    def restore_document(
        document_id: int, version: int, base_version: int, ctx: Context | None = None
    ) -> dict[str, Any]:
        """Save a new version of a knowledge document equal to an earlier one; nothing is lost.

        Args:
            document_id: the document's id.
            version: the earlier version to bring back.
            base_version: the document's current version, as you read it; refused if it changed since.

        Returns:
            The document as it is now (its new version).
        """
        with tool_errors():
            return lib.knowledge.documents.restore(tool_caller(lib, ctx), document_id, version, base_version)

    @server.tool()
    def record_knowledge_feedback(
        document_id: int,
        feedback_type: str,
        rating: int | None = None,
        comment: str | None = None,
        search_query: str | None = None,
        was_used: bool = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Say whether a knowledge document helped; useful documents rank higher for everyone.

        Args:
            document_id: the document's id.
            feedback_type: helpful, not_helpful, outdated or incorrect.
            rating: optional 1-5 stars.
            comment: optional, why.
            search_query: what you searched for when you found it; with a helpful verdict (or 4-5
                stars), later searches of your organisation for similar questions rank this
                document higher.
            was_used: true when you acted on it.

        Returns:
            The document's new usefulness_score (0-5, smoothed), feedback_count and flags.
        """
        with tool_errors():
            return lib.knowledge.feedback(
                document_id,
                feedback_type,
                rating=rating,
                comment=comment,
                search_query=search_query,
                was_used=was_used,
                principal=tool_caller(lib, ctx),
            )
