"""Version-aware SDK research: SDK names and aliases, version resolution, ``research_api_usage``."""
