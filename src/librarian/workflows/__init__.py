"""Workflows for every interface: the task runtime on behalf of a principal (``lib.workflows``).

``service.py`` submits, reads, follows, answers and cancels workflows under the caller's identity;
``fixes.py`` shows and retires the verified fixes and the strategy statistics; ``host.py`` holds the one
task runtime a facade runs (shared with runbook steps).
"""
