"""Saved replies: a tenant's canned answers that an agent expands in the inbox's reply box
by typing `/shortcut`, with variables (`{{visitor.name}}`) filled in for the conversation
at hand."""
