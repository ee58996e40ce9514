"""Errors in OpenAI's envelope, `{"error": {"message", "type", "param", "code"}}`, so the
official client raises the matching exception (AuthenticationError, NotFoundError,
RateLimitError, BadRequestError …) unchanged."""

from __future__ import annotations

from django.http import JsonResponse

from tandem.db_pool import BUSY_MESSAGE, RETRY_AFTER_S, pool_exhausted

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
}


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        return error_response(self.status, self.message, code=self.code, param=self.param, headers=self.headers)


def error_response(status: int, message: str, *, code: str | None = None, param: str | None = None,
                   headers: dict[str, str] | None = None) -> JsonResponse:
    body = {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}
    resp = JsonResponse(body, status=status)
    for k, v in (headers or {}).items():
        resp[k] = v
    return resp


def busy_error() -> ApiError:
    """The web process's database pool stayed full (tandem.db_pool.pool_exhausted)."""
    return ApiError(503, BUSY_MESSAGE, code="server_busy",
                    headers={"Retry-After": str(RETRY_AFTER_S)})


def drf_exception_handler(exc, context):
    """DRF's errors (sync endpoints) in the same envelope."""
    from rest_framework import exceptions
    from rest_framework.views import exception_handler

    if pool_exhausted(exc):
        exc = busy_error()
    if isinstance(exc, ApiError):
        return _as_drf(exc.status, exc.message, exc.code, exc.param, exc.headers)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        param, message = first_validation_error(exc.detail)
        return _as_drf(400, message, "invalid_value", param)
    code = getattr(exc, "default_code", None)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return _as_drf(response.status_code, detail, code, None, {})


def first_validation_error(detail, prefix: str = "") -> tuple[str | None, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):  # DRF reports list items by index
                return first_validation_error(value, f"{prefix}[{key}]")
            name = key if key != "non_field_errors" else ""
            path = f"{prefix}.{name}" if prefix and name else (name or prefix)
            return first_validation_error(value, path)
    if isinstance(detail, list) and detail:
        if all(isinstance(d, str) for d in detail):
            return prefix or None, f"{prefix + ': ' if prefix else ''}{detail[0]}"
        for i, d in enumerate(detail):
            if d:
                return first_validation_error(d, f"{prefix}[{i}]")
    return prefix or None, str(detail)


def _as_drf(status, message, code, param, headers):
    from rest_framework.response import Response

    body = {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}
    return Response(body, status=status, headers=headers)
