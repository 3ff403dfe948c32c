"""The ``librarian`` command line (Typer)."""
