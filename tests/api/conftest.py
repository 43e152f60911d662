"""The API tests' fixtures: the whole local runs' `jobs` (tests/local/conftest.py)."""

from local.conftest import jobs

__all__ = ["jobs"]
