"""Whether the assistant is any good (docs/outcomes.md): visitors' ratings of replies
(👍/👎 with a comment), CSAT at the end of a conversation, and the outcome figures the
console shows, all computed from stored rows. The surfaces (the widget socket, REST, the
console) call the services and selectors here; nothing here talks to the model tiers."""
