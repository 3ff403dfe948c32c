"""The documentation catalog (``lib.catalog``): sources, whole pages and libraries, for every interface."""
