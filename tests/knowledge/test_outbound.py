"""The SSRF guard every sync fetch goes through: each non-public range refused (by
address, IPv4-mapped IPv6 read as IPv4), a name that resolves to one refused, the
operator's allow-list the only way in, a redirect checked again, and a response bounded
in size and content type. The allowed site is a real http.server on 127.0.0.1."""

from __future__ import annotations

import pytest

from knowledge import outbound

from .site import Site


@pytest.mark.parametrize("address,kind", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("100.64.0.1", "not public"), ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"), ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"),
])
def test_every_non_public_range_is_refused(address, kind):
    assert outbound.address_refusal(address) == kind


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::6810:85e5", "8.8.8.8"])
def test_a_public_address_is_not_refused(address):
    assert outbound.address_refusal(address) is None


@pytest.fixture
def site():
    with Site() as s:
        s.file("/page", "text/html", b"<html><body><p>hello</p></body></html>")
        s.file("/big", "text/html", b"x" * 2048)
        s.file("/binary", "application/octet-stream", b"\x00\x01")
        yield s


def test_a_name_that_resolves_to_loopback_is_refused_without_a_request(site, settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = []
    port = site.base.rsplit(":", 1)[1]
    for url in (f"http://localhost:{port}/page", f"{site.base}/page", f"http://[::ffff:127.0.0.1]:{port}/page"):
        with pytest.raises(outbound.FetchRefused) as refused:
            outbound.fetch(url, accept=("text/",))
        assert refused.value.code == "address"
    assert sum(site.hits.values()) == 0


def test_the_operators_allow_list_lets_exactly_that_host_through(site, settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    assert outbound.fetch(f"{site.base}/page", accept=("text/html",)).status == 200
    port = site.base.rsplit(":", 1)[1]
    with pytest.raises(outbound.FetchRefused, match="loopback"):
        outbound.fetch(f"http://localhost:{port}/page", accept=("text/",))


def test_a_redirect_to_a_host_not_allowed_is_refused(site, settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    port = site.base.rsplit(":", 1)[1]
    site.redirect("/away", f"http://localhost:{port}/page")
    site.redirect("/metadata", "http://169.254.169.254/latest/meta-data/")
    for path in ("/away", "/metadata"):
        with pytest.raises(outbound.FetchRefused) as refused:
            outbound.fetch(f"{site.base}{path}", accept=("text/",))
        assert refused.value.code == "address"
    assert site.hits["/page"] == 0


def test_size_content_type_scheme_and_redirect_loops_are_refused_by_name(site, settings):
    settings.TANDEM_OUTBOUND_ALLOW_HOSTS = ["127.0.0.1"]
    site.redirect("/loop", "/loop")
    cases = [(f"{site.base}/big", {"max_bytes": 1024}, "size"), (f"{site.base}/binary", {}, "content_type"),
             ("file:///etc/passwd", {}, "scheme"), ("gopher://127.0.0.1/", {}, "scheme"),
             (f"{site.base}/loop", {}, "redirects"), (f"{site.base}/missing", {}, "status")]
    for url, kwargs, code in cases:
        with pytest.raises(outbound.FetchRefused) as refused:
            outbound.fetch(url, accept=("text/",), **kwargs)
        assert refused.value.code == code, url
