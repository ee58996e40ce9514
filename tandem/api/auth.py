"""Bearer secret-key authentication for the REST API, in one place for the async
(OpenAI-compatible) views and the DRF views alike."""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication

from tenants.models import ApiKey
from tenants.services import AuthenticationFailed, api_key_authenticate

from .errors import ApiError


def bearer_key(request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "Missing bearer authentication in the Authorization header "
                            "(Authorization: Bearer sk_…).", code="missing_api_key")
    return token.strip()


def authenticate_request(request) -> ApiKey:
    """The request's live secret key, or ApiError(401)."""
    try:
        return api_key_authenticate(plaintext=bearer_key(request), kind=ApiKey.Kind.SECRET)
    except AuthenticationFailed as exc:
        raise ApiError(401, str(exc), code=exc.code) from None


class SecretKeyAuthentication(BaseAuthentication):
    """DRF adapter: sets request.user to None and request.auth to the ApiKey."""

    def authenticate(self, request):
        return (None, authenticate_request(request))

    def authenticate_header(self, request):
        return 'Bearer realm="tandem"'
