"""Ingestion: sources yield raw files, parsers turn them into sections, chunking into chunks."""
