"""The attachments' HTTP endpoints outside the console:

- `POST /chat/attachments/?key=pk_…` (multipart: `file`, `visitor` the widget's visitor
  token, and `user`, `user_hash` as the socket takes them): a visitor's upload, from a
  page of one of the key's allowed origins (CORS). Answers 201 with the attachment's id,
  which the widget then sends over the socket (frame `attachment`, docs/protocol.md).
- `GET /attachments/<signed token>/`: the file, for a link minted for a participant of
  its conversation (tandem.attachments.links), until it expires.

Thin: checks go to tenants.services and tandem.chat.visitors, the work to services."""

from __future__ import annotations

import logging

from django.http import FileResponse, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from tandem.chat.visitors import IdentityRefused, visitor_establish, visitor_token_read
from tandem.chat.widget import page_origin
from tenants.models import ApiKey
from tenants.services import AuthenticationFailed, api_key_authenticate, origin_allowed

from . import kinds, links, services
from .models import Attachment
from .selectors import attachment_data, policy_of
from .storage import attachment_storage

log = logging.getLogger(__name__)
FORM_OVERHEAD = 64 * 1024  # the multipart envelope and the small fields around the file


def _answer(status: int, body: dict, cors: dict) -> JsonResponse:
    response = JsonResponse(body, status=status)
    for name, value in cors.items():
        response[name] = value
    response["Cache-Control"] = "no-store"
    return response


def _error(status: int, code: str, message: str, cors: dict) -> JsonResponse:
    return _answer(status, {"error": {"code": code, "message": message}}, cors)


@csrf_exempt  # no cookies: the key, the origin and the visitor's signed token say who it is
def widget_upload(request):
    origin = page_origin(origin=request.headers.get("Origin"), fetch_site=request.headers.get("Sec-Fetch-Site"),
                         own_origin=request.build_absolute_uri("/").rstrip("/"))
    cors = {"Access-Control-Allow-Origin": origin, "Vary": "Origin"} if origin else {"Vary": "Origin"}
    if request.method == "OPTIONS":
        response = HttpResponse(status=204)
        for name, value in {**cors, "Access-Control-Allow-Methods": "POST", "Access-Control-Max-Age": "600"}.items():
            response[name] = value
        return response
    if request.method != "POST":
        return _error(405, "method_not_allowed", "Upload with POST.", cors)
    try:
        api_key = api_key_authenticate(plaintext=request.GET.get("key", ""), kind=ApiKey.Kind.WIDGET)
    except AuthenticationFailed as exc:
        return _error(401, exc.code, str(exc), cors)
    if not origin_allowed(api_key=api_key, origin=origin):
        return _error(403, "origin_not_allowed", f"Origin {origin!r} is not allowed for this key.", cors)
    tenant = api_key.tenant
    policy = policy_of(tenant=tenant)
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if policy.enabled and length > policy.max_bytes + FORM_OVERHEAD:  # refused before the body is read
        return _error(413, "file_too_large", f"The upload is {length} bytes; files may be at most "
                                             f"{policy.max_bytes} bytes here.", cors)
    visitor_id = visitor_token_read(tenant=tenant, token=request.POST.get("visitor", ""))
    if visitor_id is None:
        return _error(401, "invalid_visitor", "The visitor token is missing or not this widget's.", cors)
    try:
        visitor = visitor_establish(tenant=tenant, visitor_id=visitor_id, user_id=request.POST.get("user", ""),
                                    user_hash=request.POST.get("user_hash", ""))
    except IdentityRefused as exc:
        return _error(401, exc.code, str(exc), cors)
    try:
        attachment = services.attachment_upload(tenant=tenant, upload=request.FILES.get("file"),
                                                sender=Attachment.Sender.VISITOR, owner=visitor.subject)
    except services.AttachmentRefused as exc:
        return _error(exc.status, exc.code, str(exc), cors)
    return _answer(201, {"attachment": attachment_data(attachment, url=False)}, cors)


@require_GET
def attachment_serve(request, token: str):
    """The file behind a signed link: an image of an inline type shown in place, anything
    else as a download; never sniffed into something else (nosniff), never run (a
    sandboxing CSP), and loadable by the widget's host page (CORP cross-origin)."""
    try:
        attachment_id = links.attachment_id_read(token)
    except links.LinkExpired:
        return _refused(403, "This link has expired. Reopen the conversation for a new one.")
    except links.LinkInvalid:
        return _refused(404, "No such file.")
    attachment = Attachment.objects.filter(pk=attachment_id, message__isnull=False).first()
    if attachment is None:  # deleted since (a contact erased, a retention purge)
        return _refused(404, "No such file.")
    try:
        handle = attachment_storage().open(attachment.path, "rb")
    except FileNotFoundError:
        log.error("attachment %s has no file at %s", attachment.pk, attachment.path)
        return _refused(404, "No such file.")
    inline = attachment.content_type in kinds.INLINE_TYPES
    response = FileResponse(handle, content_type=kinds.served_type(attachment.content_type),
                            as_attachment=not inline, filename=attachment.name)
    if inline:  # FileResponse names the file only for downloads
        response["Content-Disposition"] = response.get("Content-Disposition") or "inline"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cross-Origin-Resource-Policy"] = "cross-origin"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "private, max-age=300"
    return response


def _refused(status: int, text: str) -> HttpResponse:
    response = HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response
