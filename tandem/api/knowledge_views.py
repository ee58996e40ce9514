"""The tenant's help articles over REST (secret key): list, create, read, edit, delete,
bulk import, and the retrieval settings. Thin: each calls `knowledge.services` or
`knowledge.selectors`; another tenant's article id is a 404 like a missing one."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpResponse, JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import MultiPartParser

from knowledge import importing, selectors, services
from tandem.db_pool import pooled_sync_to_async
from tenants.access import NotFound

from . import knowledge_serializers as ks
from .base import AsyncAPIView
from .errors import ApiError
from .openai_views import ERRORS

# An article's body may be up to services.MAX_BODY_CHARS characters, which JSON escapes
# can make several bytes each: the endpoints that take one accept Django's own limit on
# a request body, so an oversize body is refused by name rather than by size.
ARTICLE_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
UPLOAD_REQUEST_BYTES = importing.MAX_UPLOAD_BYTES + 1024 * 1024
NO_CONTENT = {204: OpenApiResponse(description="Deleted.")}


def _input(call, **kwargs):
    """`call`, with refused input turned into a 400 naming the field and a missing (or
    another tenant's) article into a 404."""
    try:
        return call(**kwargs)
    except services.KnowledgeInputError as exc:
        raise ApiError(400, f"{exc.field}: {exc}", code="invalid_value", param=exc.field) from None
    except NotFound as exc:
        raise ApiError(404, str(exc), code=exc.code) from None


def _only(data: dict, allowed) -> None:
    for name in data:
        if name not in allowed:
            raise ApiError(400, f"{name} is not a field here; the fields are {', '.join(allowed)}.",
                           code="invalid_value", param=name)


def _page(request) -> tuple[int, int]:
    values = {}
    for name, default, low, high in (("limit", 20, 1, 100), ("offset", 0, 0, 10**9)):
        raw = request.GET.get(name, default)
        try:
            values[name] = int(raw)
        except (TypeError, ValueError):
            raise ApiError(400, f"{name} must be an integer.", code="invalid_value", param=name) from None
        if not low <= values[name] <= high:
            raise ApiError(400, f"{name} must be between {low} and {high}.", code="invalid_value", param=name)
    return values["limit"], values["offset"]


class ArticleListView(AsyncAPIView):
    @extend_schema(operation_id="listArticles", responses={200: ks.ArticleListSerializer, **ERRORS},
                   parameters=[ks.ArticleListQuerySerializer], tags=["knowledge"])
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="createArticle", request=ks.ArticleCreateSerializer,
                   responses={201: ks.ArticleDetailSerializer, **ERRORS}, tags=["knowledge"],
                   description="Add a help article. It is indexed in the background: `status` is "
                               "`pending` until then, `indexed` (or `failed`, with `error`) after.")
    def post(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)
        limit, offset = _page(request)

        def page():
            rows, more = selectors.article_list(tenant=api_key.tenant, limit=limit, offset=offset)
            return [ks.article_data(a) for a in rows], more

        data, more = await pooled_sync_to_async(page)()
        return JsonResponse({"object": "list", "data": data, "has_more": more})

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        body = await pooled_sync_to_async(_json)(self, request)
        data = self.validate(ks.ArticleCreateSerializer, body)
        article = await pooled_sync_to_async(_input)(services.article_create, tenant=api_key.tenant, **data)
        return JsonResponse(ks.article_data(article, body=True), status=201)


class ArticleDetailView(AsyncAPIView):
    @extend_schema(operation_id="getArticle", responses={200: ks.ArticleDetailSerializer, **ERRORS},
                   tags=["knowledge"])
    def get(self, request, article_id):
        raise NotImplementedError

    @extend_schema(operation_id="updateArticle", request=ks.ArticleUpdateSerializer,
                   responses={200: ks.ArticleDetailSerializer, **ERRORS}, tags=["knowledge"],
                   description="Change some fields. A new title, URL or body re-indexes the article.")
    def patch(self, request, article_id):
        raise NotImplementedError

    @extend_schema(operation_id="deleteArticle", responses={**NO_CONTENT, **ERRORS}, tags=["knowledge"],
                   description="Delete the article and its chunks: retrieval never returns it again.")
    def delete(self, request, article_id):
        raise NotImplementedError

    async def get_async(self, request, article_id):
        api_key = await self.authenticate(request)
        article = await pooled_sync_to_async(_input)(selectors.article_get, tenant=api_key.tenant,
                                                     article_id=article_id)
        return JsonResponse(ks.article_data(article, body=True))

    async def patch_async(self, request, article_id):
        api_key = await self.authenticate(request)
        body = await pooled_sync_to_async(_json)(self, request)
        _only(body, list(ks.ArticleUpdateSerializer().fields))
        data = self.validate(ks.ArticleUpdateSerializer, body)

        def update():
            article = selectors.article_get(tenant=api_key.tenant, article_id=article_id)
            return services.article_update(article=article, **data)

        article = await pooled_sync_to_async(_input)(update)
        return JsonResponse(ks.article_data(article, body=True))

    async def delete_async(self, request, article_id):
        api_key = await self.authenticate(request)

        def delete():
            services.article_delete(article=selectors.article_get(tenant=api_key.tenant, article_id=article_id))

        await pooled_sync_to_async(_input)(delete)
        return HttpResponse(status=204)


class ArticleImportView(AsyncAPIView):
    parser_classes = [MultiPartParser]

    @extend_schema(operation_id="importArticles", request=ks.IMPORT_REQUEST,
                   responses={201: ks.ImportResultSerializer, **ERRORS}, tags=["knowledge"],
                   description="Create or update many articles at once, all or none, from a JSONL file "
                               "or a zip of .md/.txt/.html files (form field `file`). A file's path (or a "
                               "record's `source`) identifies its article: importing it again updates it.")
    def post(self, request):
        raise NotImplementedError

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        length = request.headers.get("Content-Length") or "0"
        if length.isdigit() and int(length) > UPLOAD_REQUEST_BYTES:
            raise ApiError(413, f"The upload is {length} bytes; the limit is {UPLOAD_REQUEST_BYTES}.",
                           code="request_too_large", param="file")

        def run():
            items = _upload_items(request)
            return services.articles_import(tenant=api_key.tenant, items=items, index="async")

        result = await pooled_sync_to_async(_input)(run)
        return JsonResponse({"object": "knowledge.import", "created": result.created, "updated": result.updated,
                             "unchanged": result.unchanged,
                             "data": [ks.article_data(a) for a in result.articles]}, status=201)


class KnowledgeSettingsView(AsyncAPIView):
    @extend_schema(operation_id="getKnowledgeSettings", responses={200: ks.KnowledgeSettingsSerializer, **ERRORS},
                   tags=["knowledge"])
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="updateKnowledgeSettings", request=ks.KnowledgeSettingsUpdateSerializer,
                   responses={200: ks.KnowledgeSettingsSerializer, **ERRORS}, tags=["knowledge"],
                   description="Retrieval for this tenant: on or off, passages per message, the minimum "
                               "score, the language its articles are indexed in (a change re-indexes them).")
    def patch(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)
        current = await pooled_sync_to_async(selectors.settings_for)(api_key.tenant)
        return JsonResponse(_settings_data(current))

    async def patch_async(self, request):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        _only(body, list(ks.KnowledgeSettingsUpdateSerializer().fields))
        data = self.validate(ks.KnowledgeSettingsUpdateSerializer, body)
        current = await pooled_sync_to_async(_input)(services.settings_update, tenant=api_key.tenant, **data)
        return JsonResponse(_settings_data(current))


def _settings_data(s) -> dict:
    return {"object": "knowledge.settings", "enabled": s.enabled, "top_k": s.top_k, "min_score": s.min_score,
            "language": s.language, "mode": s.mode}


def _json(view: AsyncAPIView, request) -> dict:
    try:
        return view.json_body(request, max_bytes=ARTICLE_BODY_BYTES)
    except RequestDataTooBig:
        raise ApiError(413, f"The request body is over {ARTICLE_BODY_BYTES} bytes.", code="request_too_large") from None


def _upload_items(request) -> list[services.ArticleInput]:
    """The uploaded file's articles: a .jsonl (or JSON lines under another name) or a .zip."""
    content_type = request.headers.get("Content-Type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise services.KnowledgeInputError("file", "send the file as multipart/form-data, in the field `file`.")
    try:
        upload = request.FILES.get("file")
    except (SuspiciousOperation, RequestDataTooBig, ValueError, OSError):
        # Django's MultiPartParserError is a ValueError; too many fields or files are
        # SuspiciousOperations.
        raise services.KnowledgeInputError("file", "the multipart body cannot be parsed.") from None
    if upload is None:
        raise services.KnowledgeInputError("file", "no file in the field `file`.")
    if upload.size > importing.MAX_UPLOAD_BYTES:
        raise services.KnowledgeInputError("file", f"the file is over {importing.MAX_UPLOAD_BYTES // 2**20} MiB.")
    data = upload.read()
    name = (upload.name or "").lower()
    if name.endswith(".zip") or data[:4] == b"PK\x03\x04":
        return importing.parse_zip(data, field="file")
    if name.endswith((".jsonl", ".ndjson", ".json")) or data.lstrip()[:1] == b"{":
        return importing.parse_jsonl(data, field="file")
    raise services.KnowledgeInputError("file", "the file must be a .zip or a .jsonl file.")
