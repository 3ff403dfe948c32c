"""Incidents, similarity verdicts, solutions and their outcomes.

``incident_knowledge`` (the design's table: problem signature, root cause, solution applied,
resolution steps, outcome), ``incident_similarity_feedback`` (users' similar / not similar verdicts),
``solutions`` (linked to a problem signature, with success and failure counts) and
``solution_outcomes``. Each row has its organisation and access grants, as documents do.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def _access() -> list[sa.Column[object]]:
    return [
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("visibility", sa.String(16), nullable=False),
        sa.Column("allowed_teams", JSON_TYPE, nullable=False),
        sa.Column("access_grants", JSON_TYPE, nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "incident_knowledge",
        sa.Column("id", sa.Integer, primary_key=True),
        *_access(),
        sa.Column("knowledge_document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="SET NULL")),
        sa.Column("workflow_id", sa.String(64), nullable=True),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("incident_type", sa.String(100), nullable=True),
        sa.Column("severity", sa.String(16), nullable=True),
        sa.Column("problem_signature", JSON_TYPE, nullable=False),
        sa.Column("normalized", JSON_TYPE, nullable=False),
        sa.Column("problem_hash", sa.String(64), nullable=False),
        sa.Column("root_cause", sa.Text, nullable=True),
        sa.Column("solution_applied", sa.Text, nullable=True),
        sa.Column("resolution_steps", JSON_TYPE, nullable=False),
        sa.Column("tags", JSON_TYPE, nullable=False),
        sa.Column("related_incidents", JSON_TYPE, nullable=False),
        sa.Column("resolution_time_minutes", sa.Integer, nullable=True),
        sa.Column("was_successful", sa.Boolean, nullable=True),
        sa.Column("recurred", sa.Boolean, nullable=False),
        sa.Column("occurred_at", TS, nullable=True),
        sa.Column("origin", JSON_TYPE, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        # Ids are never reused, so (count, max id) tells the similarity index when to reload.
        sqlite_autoincrement=True,
    )
    op.create_index("ix_incident_knowledge_org", "incident_knowledge", ["organization_id", "severity"])
    op.create_index("ix_incident_knowledge_workflow_id", "incident_knowledge", ["workflow_id"])
    op.create_table(
        "incident_similarity_feedback",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "incident_id",
            sa.Integer,
            sa.ForeignKey("incident_knowledge.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "other_id", sa.Integer, sa.ForeignKey("incident_knowledge.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("organization_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("similar", sa.Boolean, nullable=False),
        sa.Column("features", JSON_TYPE, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("incident_id", "other_id", "user_id"),
    )
    op.create_index(
        "ix_incident_similarity_feedback_incident_id", "incident_similarity_feedback", ["incident_id"]
    )
    op.create_index(
        "ix_incident_similarity_feedback_organization_id", "incident_similarity_feedback", ["organization_id"]
    )
    op.create_table(
        "solutions",
        sa.Column("id", sa.Integer, primary_key=True),
        *_access(),
        sa.Column("signature_key", sa.String(64), nullable=False),
        sa.Column("problem_signature", JSON_TYPE, nullable=False),
        sa.Column("normalized", JSON_TYPE, nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("solution", sa.Text, nullable=False),
        sa.Column("knowledge_document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="SET NULL")),
        sa.Column("successes", sa.Integer, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("uses", sa.Integer, nullable=False),
        sa.Column("last_used_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_solutions_signature", "solutions", ["organization_id", "signature_key"])
    op.create_table(
        "solution_outcomes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "solution_id", sa.Integer, sa.ForeignKey("solutions.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("incident_id", sa.Integer, sa.ForeignKey("incident_knowledge.id", ondelete="SET NULL")),
        sa.Column("user_id", sa.Integer, nullable=True),
        sa.Column("worked", sa.Boolean, nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_solution_outcomes_solution_id", "solution_outcomes", ["solution_id"])


def downgrade() -> None:
    for table in ("solution_outcomes", "solutions", "incident_similarity_feedback", "incident_knowledge"):
        op.drop_table(table)
