"""The console's world (two tenants with people in every role) for the security tests
that act through the console."""

from tests.console.conftest import world  # noqa: F401 - a fixture, used by name
