"""The console's views: thin. Each resolves what its URL names through
tenants.membership (another tenant's id is a 404, a role that may not is a 403), parses
the request with a form, calls one service or selector, and renders."""
