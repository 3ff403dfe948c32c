"""Source refresh recipes, HTTP validators of crawled pages, and research feedback.

``sources.options`` keeps what a connector needs to run again (scopes of a CLI walk, crawl limits),
so ``librarian refresh`` can repeat any ingest; ``research_feedback`` records which snippet resolved
which error, so later research for a similar error ranks it higher.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("sources", sa.Column("options", JSON_TYPE, nullable=False, server_default=sa.text("'{}'")))
    op.add_column("sources", sa.Column("refresh_interval_seconds", sa.Integer(), nullable=True))
    # HTTP validators of a crawled page, sent back as If-None-Match / If-Modified-Since on refresh.
    op.add_column("documents", sa.Column("etag", sa.Text(), nullable=True))
    op.add_column("documents", sa.Column("last_modified", sa.String(64), nullable=True))
    op.create_table(
        "research_feedback",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("sdk_name", sa.String(255), nullable=False),
        sa.Column("sdk_version", sa.String(255), nullable=True),
        sa.Column("error_signature", sa.String(64), nullable=False),
        sa.Column("error_text", sa.Text(), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("query", sa.Text(), nullable=True),
        sa.Column("entity_name", sa.Text(), nullable=True),
        sa.Column("source_url", sa.Text(), nullable=False),
        sa.Column("chunk_content_hash", sa.String(64), nullable=True),
        sa.Column("helpful", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_feedback_sdk_signature", "research_feedback", ["sdk_name", "error_signature"])


def downgrade() -> None:
    op.drop_index("ix_feedback_sdk_signature", table_name="research_feedback")
    op.drop_table("research_feedback")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("last_modified")
        batch.drop_column("etag")
    with op.batch_alter_table("sources") as batch:
        batch.drop_column("refresh_interval_seconds")
        batch.drop_column("options")
