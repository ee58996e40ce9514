"""A model worker process: its configuration, the runtime it loads once at start-up (the
engine, KV store, stream publisher), heartbeats, cancel listening, and its command line."""
