"""Alembic environment: runs migrations on the connection Librarian hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from librarian.storage.models import Base

connection = context.config.attributes.get("connection")
if connection is None:  # the alembic command line: take the URL from alembic.ini or -x url=...
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("pass the database URL with: alembic -x url=sqlite:///path upgrade head")
    with create_engine(url).begin() as own_connection:
        context.configure(connection=own_connection, target_metadata=Base.metadata)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
