"""Async endpoints that still appear in the OpenAPI schema.

Django REST framework views are synchronous, and under ASGI Django runs each request's
synchronous view on a thread of its own (asgiref's ThreadSensitiveContext): a view that
waited for a whole generation would hold that thread, and a pooled database connection,
for as long, so a few such requests would hold the whole pool. So the endpoints that
wait on a reply are async functions; this base gives them a DRF APIView class
(`view.cls`) that drf-spectacular reads for the
schema, while requests go to the class's `<method>_async` handlers.

Their database work goes through `tandem.db_pool.pooled_sync_to_async`, which gives the
connection back to the web process's pool after each call: a reply's connection is
otherwise held for as long as it streams or waits, and a few long replies would hold
every pooled connection."""

from __future__ import annotations

import json
import logging

from rest_framework.parsers import JSONParser
from rest_framework.views import APIView

from tandem.db_pool import pool_exhausted, pooled_sync_to_async
from tenants.models import ApiKey

from .auth import authenticate_request
from .errors import ApiError, busy_error, error_response, first_validation_error

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 1024 * 1024


class AsyncAPIView(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    parser_classes = [JSONParser]  # the API takes JSON only (and the schema says so)

    @classmethod
    def as_view(cls, **initkwargs):
        async def view(request, *args, **kwargs):
            self = cls(**initkwargs)
            handler = getattr(self, f"{request.method.lower()}_async", None)
            if handler is None:
                return error_response(405, f"Method {request.method} is not allowed here.",
                                      code="method_not_allowed")
            try:
                return await handler(request, *args, **kwargs)
            except ApiError as exc:
                return exc.response()
            except Exception as exc:
                if pool_exhausted(exc):
                    return busy_error().response()
                # A bug, not a refusal: logged with its traceback, and answered in the
                # envelope every OpenAI client parses rather than Django's HTML page.
                log.exception("%s %s failed", request.method, request.path)
                return error_response(500, "The server failed to handle this request.", code="internal_error")

        view.cls = cls
        view.initkwargs = initkwargs
        view.csrf_exempt = True  # bearer-token API: no cookies, so no CSRF
        return view

    # drf-spectacular asks the class which methods it allows.
    @property
    def allowed_methods(self):
        return [m.upper() for m in self.http_method_names if hasattr(self, f"{m}_async")]

    async def authenticate(self, request) -> ApiKey:
        return await pooled_sync_to_async(authenticate_request)(request)

    @staticmethod
    def json_body(request, max_bytes: int = MAX_BODY_BYTES) -> dict:
        length = int(request.headers.get("Content-Length") or 0)
        if length > max_bytes:
            raise ApiError(413, f"The request body is {length} bytes; the limit is {max_bytes}.",
                           code="request_too_large")
        body = request.body
        if len(body) > max_bytes:
            raise ApiError(413, f"The request body is over {max_bytes} bytes.", code="request_too_large")
        content_type = request.headers.get("Content-Type", "")
        if content_type and "json" not in content_type.lower():
            raise ApiError(415, "The body must be JSON (Content-Type: application/json).",
                           code="unsupported_media_type")
        try:
            data = json.loads(body) if body.strip() else {}  # no body: every field takes its default
        except (ValueError, RecursionError):
            # ValueError covers JSONDecodeError, UnicodeDecodeError and Python's limit on
            # an integer's digits; RecursionError, nesting deeper than the parser allows.
            raise ApiError(400, "The body is not valid JSON.", code="invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError(400, "The body must be a JSON object.", code="invalid_json")
        return data

    @staticmethod
    def validate(serializer_class, data: dict) -> dict:
        serializer = serializer_class(data=data)
        if not serializer.is_valid():
            param, message = first_validation_error(serializer.errors)
            raise ApiError(400, message, code="invalid_value", param=param)
        return serializer.validated_data
