"""A tenant's first hour: the getting-started checklist on its overview and the facts it
is read from (docs/console.md, "Getting started")."""
