"""Labels: a tenant's own tags for conversations ("refund", "bug", "VIP"), defined under
Inbox → Labels, set from a conversation or from the inbox's bulk actions, and a filter
of the inbox. Models, services (writes) and selectors (reads) live here; the console's
pages are tandem.console.views.inbox_labels."""
