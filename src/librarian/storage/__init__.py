"""The source of truth: SQLAlchemy models, migrations and repositories (SQLite or PostgreSQL)."""
