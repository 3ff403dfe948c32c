"""Sources enumerate the files of an ingest target (a folder, a file, a git repository)."""
