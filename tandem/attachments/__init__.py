"""Attachments: images and files that visitors and agents send in a conversation
(docs/attachments.md).

- `kinds`: what a file is, read from its bytes (never from the name or the type the
  client claims), and how it is served.
- `models`: the stored file (`Attachment`) and the tenant's limits (`AttachmentPolicy`).
- `storage`: where files live (Django's storage API: local disk by default, an
  S3-compatible store by settings).
- `services`: upload (checked against the tenant's limits), send into a conversation
  (visitor or agent), erase; `links`: the signed, expiring URLs they are served at.
- `socket`, `views`, `console`: the widget's reference frame, the upload and serving
  endpoints, the agent's attach button and the tenant's settings page.

The file travels over HTTP; the chat socket carries only a reference to it."""
