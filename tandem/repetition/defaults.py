"""The repetition control a tenant's replies get when it saved none: on, with these
(frequency, presence, repetition) penalties, chosen with `python -m benchmarks
repetition` on the shipped 60 support questions (docs/api.md, "Sampling controls", has
the table). A small model answering greedily loops: on "How do I reset my password?" the
default model wrote the same sentence about entering the new password again until
max_tokens ended it. No Django models here: tandem.chat.sampling reads these at import."""

WIDGET_REPETITION = (0.8, 0.0, 1.0)
