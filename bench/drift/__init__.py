"""The drift benchmark: real API changes in real tools and libraries, corrected by the self-correcting loop.

See ``bench/drift/README.md`` and ``python -m bench.drift --help``.
"""
