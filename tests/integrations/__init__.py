import pytest

# The shared checks live in a helper module: let pytest explain their failures as it does a test's own asserts.
pytest.register_assert_rewrite("integrations.integration_helpers")
