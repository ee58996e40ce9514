"""The tests' password hasher: Django's PBKDF2 at 1,000 iterations instead of 1,000,000.

A hash costs about half a second at the product's count, and the `world` fixture alone
makes five users for each of its tests. The hashes keep the product's algorithm name,
with their iteration count written inside them, so the platform's own processes (daphne,
`make run`) verify them too, and upgrade them on a sign-in as they would any older hash."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
