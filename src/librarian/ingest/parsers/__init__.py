"""Parsers turn the bytes of one file into a :class:`~librarian.ingest.parsed.ParsedDocument`."""
