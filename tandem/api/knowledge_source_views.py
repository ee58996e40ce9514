"""The tenant's knowledge sources over REST (secret key): websites and file sets, their
sync status and progress, "sync now", and a files source's files. Thin: each calls
`knowledge.sources` or `knowledge.selectors`; another tenant's source is a 404 like a
missing one. A sync never runs here: asking for one answers 202 at once."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework.parsers import MultiPartParser

from knowledge import selectors, sources
from knowledge.extraction import MAX_FILE_BYTES
from knowledge.services import KnowledgeInputError
from tandem.db_pool import pooled_sync_to_async

from . import knowledge_source_serializers as ss
from .base import AsyncAPIView
from .errors import ApiError
from .knowledge_views import NO_CONTENT, _input, _only
from .openai_views import ERRORS

UPLOAD_REQUEST_BYTES = MAX_FILE_BYTES + 1024 * 1024
TAGS = ["knowledge sources"]


def _sync(**kwargs):
    try:
        return _input(sources.source_sync_request, **kwargs)
    except sources.SyncInProgress as exc:
        raise ApiError(409, str(exc), code="sync_in_progress") from None


class SourceListView(AsyncAPIView):
    @extend_schema(operation_id="listKnowledgeSources", responses={200: ss.SourceListSerializer, **ERRORS}, tags=TAGS)
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="createKnowledgeSource", request=ss.SourceCreateSerializer,
                   responses={201: ss.SourceSerializer, **ERRORS}, tags=TAGS,
                   description="Add a website (its first sync starts at once) or a files source "
                               "(add files to it next).")
    def post(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)
        rows = await pooled_sync_to_async(selectors.source_list)(tenant=api_key.tenant)
        return JsonResponse({"object": "list", "data": [ss.source_data(s) for s in rows], "has_more": False})

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        _only(body, list(ss.SourceCreateSerializer().fields))
        data = self.validate(ss.SourceCreateSerializer, body)
        def create():
            return ss.source_data(sources.source_create(tenant=api_key.tenant, **data), detail=True)

        return JsonResponse(await pooled_sync_to_async(_input)(create), status=201)


class SourceDetailView(AsyncAPIView):
    @extend_schema(operation_id="getKnowledgeSource", responses={200: ss.SourceSerializer, **ERRORS}, tags=TAGS,
                   description="The source, with its sync's status and progress (found, fetched, changed, "
                               "failed) and the last sync's errors.")
    def get(self, request, source_id):
        raise NotImplementedError

    @extend_schema(operation_id="updateKnowledgeSource", request=ss.SourceUpdateSerializer,
                   responses={200: ss.SourceSerializer, **ERRORS}, tags=TAGS)
    def patch(self, request, source_id):
        raise NotImplementedError

    @extend_schema(operation_id="deleteKnowledgeSource", responses={**NO_CONTENT, **ERRORS}, tags=TAGS,
                   description="Delete the source, its files and its articles.")
    def delete(self, request, source_id):
        raise NotImplementedError

    async def get_async(self, request, source_id):
        api_key = await self.authenticate(request)
        def read():
            return ss.source_data(selectors.source_get(tenant=api_key.tenant, source_id=source_id), detail=True)

        return JsonResponse(await pooled_sync_to_async(_input)(read))

    async def patch_async(self, request, source_id):
        api_key = await self.authenticate(request)
        body = self.json_body(request)
        _only(body, list(ss.SourceUpdateSerializer().fields))
        data = self.validate(ss.SourceUpdateSerializer, body)

        def update():
            source = selectors.source_get(tenant=api_key.tenant, source_id=source_id)
            return ss.source_data(sources.source_update(source=source, **data), detail=True)

        return JsonResponse(await pooled_sync_to_async(_input)(update))

    async def delete_async(self, request, source_id):
        api_key = await self.authenticate(request)

        def delete():
            sources.source_delete(source=selectors.source_get(tenant=api_key.tenant, source_id=source_id))

        await pooled_sync_to_async(_input)(delete)
        return HttpResponse(status=204)


class SourceSyncView(AsyncAPIView):
    @extend_schema(operation_id="syncKnowledgeSource", request=None, responses={202: ss.SourceSerializer, **ERRORS},
                   tags=TAGS, description="Sync now: the source turns `queued` and a CPU worker syncs it. "
                                          "409 `sync_in_progress` while one runs.")
    def post(self, request, source_id):
        raise NotImplementedError

    async def post_async(self, request, source_id):
        api_key = await self.authenticate(request)

        def sync():
            source = selectors.source_get(tenant=api_key.tenant, source_id=source_id)
            return ss.source_data(_sync(source=source), detail=True)

        return JsonResponse(await pooled_sync_to_async(_input)(sync), status=202)


class SourceFilesView(AsyncAPIView):
    parser_classes = [MultiPartParser]

    @extend_schema(operation_id="listKnowledgeSourceFiles", responses={200: ss.SourceFileListSerializer, **ERRORS},
                   tags=TAGS)
    def get(self, request, source_id):
        raise NotImplementedError

    @extend_schema(operation_id="addKnowledgeSourceFile", request=ss.FILE_REQUEST,
                   responses={202: ss.SourceFileSerializer, **ERRORS}, tags=TAGS,
                   description="Add a file (form field `file`: PDF, DOCX, HTML, Markdown or text, at most "
                               "10 MiB), or replace the one of the same name. It is parsed and indexed by "
                               "the sync this starts.")
    def post(self, request, source_id):
        raise NotImplementedError

    async def get_async(self, request, source_id):
        api_key = await self.authenticate(request)

        def files():
            source = selectors.source_get(tenant=api_key.tenant, source_id=source_id)
            return [ss.file_data(f) for f in selectors.source_files(source=source)]

        return JsonResponse({"object": "list", "data": await pooled_sync_to_async(_input)(files), "has_more": False})

    async def post_async(self, request, source_id):
        api_key = await self.authenticate(request)
        length = request.headers.get("Content-Length") or "0"
        if length.isdigit() and int(length) > UPLOAD_REQUEST_BYTES:
            raise ApiError(413, f"The upload is {length} bytes; the limit is {UPLOAD_REQUEST_BYTES}.",
                           code="request_too_large", param="file")

        def add():
            source = selectors.source_get(tenant=api_key.tenant, source_id=source_id)
            upload = _upload(request)
            return sources.source_file_add(source=source, name=upload.name or "", data=upload.read())

        return JsonResponse(ss.file_data(await pooled_sync_to_async(_input)(add)), status=202)


class SourceFileDetailView(AsyncAPIView):
    @extend_schema(operation_id="deleteKnowledgeSourceFile", responses={**NO_CONTENT, **ERRORS}, tags=TAGS,
                   description="Remove the file; the sync this starts removes its article.")
    def delete(self, request, source_id, file_id):
        raise NotImplementedError

    async def delete_async(self, request, source_id, file_id):
        api_key = await self.authenticate(request)

        def remove():
            source = selectors.source_get(tenant=api_key.tenant, source_id=source_id)
            sources.source_file_remove(source=source, file_id=file_id)

        await pooled_sync_to_async(_input)(remove)
        return HttpResponse(status=204)


def _upload(request):
    if not request.headers.get("Content-Type", "").lower().startswith("multipart/form-data"):
        raise KnowledgeInputError("file", "send the file as multipart/form-data, in the field `file`.")
    try:
        upload = request.FILES.get("file")
    except (SuspiciousOperation, RequestDataTooBig, ValueError, OSError):
        raise KnowledgeInputError("file", "the multipart body cannot be parsed.") from None
    if upload is None:
        raise KnowledgeInputError("file", "no file in the field `file`.")
    if upload.size > MAX_FILE_BYTES:
        raise KnowledgeInputError("file", f"{upload.name} is over {MAX_FILE_BYTES // 2**20} MiB.")
    return upload
