"""The sign-in throttle counts what Django authenticates and who is really asking
(issue 27, finding 4): a look-alike spelling of a username counts with the name, and
behind a trusted proxy each client is counted by its own address, not the proxy's."""

from __future__ import annotations

import pytest

from tandem.console import throttle
from tests.console.conftest import PASSWORD, user

pytestmark = pytest.mark.django_db
PROXY = "10.0.0.1"


@pytest.fixture(autouse=True)
def fresh_throttle(redis_client):
    for key in redis_client.scan_iter(throttle.PREFIX + ":*"):
        redis_client.delete(key)
    yield
    for key in redis_client.scan_iter(throttle.PREFIX + ":*"):
        redis_client.delete(key)


def test_after_five_failures_a_full_width_spelling_of_the_username_is_throttled_too(client):
    user(username="sec_thr")
    for _ in range(throttle.MAX_PER_USERNAME):
        assert client.post("/console/login/", {"username": "sec_thr", "password": "wrong"}).status_code == 200
    # "ｓ" is FULLWIDTH LATIN SMALL LETTER S: Django's form folds it (NFKC) to "s".
    refused = client.post("/console/login/", {"username": "\uff53ec_thr", "password": PASSWORD})
    assert refused.status_code == 429
    assert "_auth_user_id" not in client.session


def test_behind_a_trusted_proxy_one_clients_failures_do_not_lock_out_everyone_else(client, settings):
    settings.TANDEM_TRUSTED_PROXIES = ["10.0.0.0/8"]
    person = user(username="bystander")
    for n in range(throttle.MAX_PER_ADDRESS):
        response = client.post("/console/login/", {"username": f"guess{n}", "password": "wrong"},
                               REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5")
        assert response.status_code == 200
    attacker = client.post("/console/login/", {"username": "guess-more", "password": "wrong"},
                           REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert attacker.status_code == 429  # the guessing client is held back...
    ok = client.post("/console/login/", {"username": person.username, "password": PASSWORD},
                     REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert ok.status_code == 302  # ...and another client through the same proxy signs in


def test_a_forwarded_for_header_from_an_untrusted_peer_does_not_escape_the_address_count(client, settings):
    settings.TANDEM_TRUSTED_PROXIES = ["10.0.0.0/8"]
    for n in range(throttle.MAX_PER_ADDRESS):
        client.post("/console/login/", {"username": f"guess{n}", "password": "wrong"},
                    REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
    refused = client.post("/console/login/", {"username": "guess-more", "password": "wrong"},
                          REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR="203.0.113.200")
    assert refused.status_code == 429
