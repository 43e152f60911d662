"""Tests of slurmgen.runtime. A package, so its conftest and helpers never collide by module name with
the top-level tests/ (which imports names from its own conftest)."""
