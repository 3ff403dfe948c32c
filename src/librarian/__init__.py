"""Librarian: a self-hosted knowledge service for AI agents.

The public entry point is :class:`librarian.app.Librarian`, a facade that wires storage, embeddings,
indexes and ingestion from one :class:`librarian.config.Settings`.
"""

__version__ = "0.1.0"
