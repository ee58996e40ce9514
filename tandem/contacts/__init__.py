"""Contacts' data (docs/privacy.md): the people who chatted with a tenant, each known by
what owns their conversations (tandem.chat.visitors): a verified user of the tenant's
site ("user:<id>") or a widget visitor ("visitor:<id>").

- `identity`: a contact from its id or from one of its conversations, and the
  conversations that are theirs.
- `export`: everything of one contact as JSON (conversations, messages, feedback,
  offline messages, attachments with their bytes).
- `erase`: what deleting conversations removes besides their rows (files, Redis
  streams, webhook events that quote them); `services`: delete a contact, the tenant's
  retention period and its purge, each audited; `tasks`: the daily purge.
- `api` (REST, secret keys) and `views` (console) are thin surfaces over these."""
