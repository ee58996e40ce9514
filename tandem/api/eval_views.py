"""A tenant's evaluation harness over REST (secret key): test cases (list, create, read,
update, delete) and runs (start one with the live or the draft settings, list, read
with per-case results). Thin: each calls `tandem.evals`; another tenant's case or run
is a 404 like a missing one. Nothing is asked here: a run's steps go to the CPU tier."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema

from tandem.db_pool import pooled_sync_to_async
from tandem.evals import selectors, services
from tenants.access import NotFound

from . import eval_serializers as es
from .base import AsyncAPIView
from .errors import ApiError
from .knowledge_views import NO_CONTENT, _only
from .openai_views import ERRORS

TAGS = ["evals"]


def _call(fn, *args):
    try:
        return fn(*args)
    except services.EvalInputError as exc:
        raise ApiError(400, str(exc), code=exc.code, param=exc.field) from None
    except NotFound as exc:
        raise ApiError(404, str(exc), code=exc.code) from None


def _body(view, request, serializer) -> dict:
    body = view.json_body(request)
    _only(body, list(serializer().fields))
    return body


class CaseListView(AsyncAPIView):
    @extend_schema(operation_id="listEvalCases", responses={200: es.CaseListSerializer, **ERRORS}, tags=TAGS)
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="createEvalCase", request=es.CaseCreateSerializer,
                   responses={201: es.CaseSerializer, **ERRORS}, tags=TAGS)
    def post(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)

        def read():
            return [es.case_data(c) for c in selectors.case_list(tenant=api_key.tenant)]

        return JsonResponse({"object": "list", "data": await pooled_sync_to_async(read)(), "has_more": False})

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        body = _body(self, request, es.CaseCreateSerializer)
        if "question" not in body:
            raise ApiError(400, "question is required.", code="invalid_value", param="question")

        def create():
            return es.case_data(services.case_create(tenant=api_key.tenant, **body))

        return JsonResponse(await pooled_sync_to_async(_call)(create), status=201)


class CaseDetailView(AsyncAPIView):
    @extend_schema(operation_id="getEvalCase", responses={200: es.CaseSerializer, **ERRORS}, tags=TAGS)
    def get(self, request, case_id):
        raise NotImplementedError

    @extend_schema(operation_id="updateEvalCase", request=es.CaseUpdateSerializer,
                   responses={200: es.CaseSerializer, **ERRORS}, tags=TAGS)
    def patch(self, request, case_id):
        raise NotImplementedError

    @extend_schema(operation_id="deleteEvalCase", responses={**NO_CONTENT, **ERRORS}, tags=TAGS)
    def delete(self, request, case_id):
        raise NotImplementedError

    async def get_async(self, request, case_id):
        api_key = await self.authenticate(request)

        def read():
            return es.case_data(selectors.case_get(tenant=api_key.tenant, case_id=case_id))

        return JsonResponse(await pooled_sync_to_async(_call)(read))

    async def patch_async(self, request, case_id):
        api_key = await self.authenticate(request)
        body = _body(self, request, es.CaseUpdateSerializer)

        def update():
            case = selectors.case_get(tenant=api_key.tenant, case_id=case_id)
            return es.case_data(services.case_update(case=case, **body))

        return JsonResponse(await pooled_sync_to_async(_call)(update))

    async def delete_async(self, request, case_id):
        api_key = await self.authenticate(request)

        def delete():
            services.case_delete(case=selectors.case_get(tenant=api_key.tenant, case_id=case_id))

        await pooled_sync_to_async(_call)(delete)
        return HttpResponse(status=204)


class RunListView(AsyncAPIView):
    @extend_schema(operation_id="listEvalRuns", responses={200: es.RunListSerializer, **ERRORS}, tags=TAGS,
                   description="The newest 50 runs, without their per-case results.")
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="createEvalRun", request=es.RunCreateSerializer,
                   responses={202: es.RunSerializer, **ERRORS}, tags=TAGS,
                   description="Start a run of every case, with the live settings or the draft's. It runs on the "
                               "tenant's pool at a low priority and its tokens count towards usage; read it "
                               "back until `status` is `done` or `failed`.")
    def post(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)

        def read():
            return [es.run_data(r, results=False) for r in selectors.run_list(tenant=api_key.tenant)]

        return JsonResponse({"object": "list", "data": await pooled_sync_to_async(read)(), "has_more": False})

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        body = _body(self, request, es.RunCreateSerializer)
        settings = body.get("settings", "live")
        if not isinstance(settings, str):
            raise ApiError(400, "settings must be 'live' or 'draft'.", code="invalid_value", param="settings")

        def start():
            return es.run_data(services.run_start(tenant=api_key.tenant, settings=settings,
                                                  draft_id=body.get("draft")))

        return JsonResponse(await pooled_sync_to_async(_call)(start), status=202)


class RunDetailView(AsyncAPIView):
    @extend_schema(operation_id="getEvalRun", responses={200: es.RunSerializer, **ERRORS}, tags=TAGS)
    def get(self, request, run_id):
        raise NotImplementedError

    async def get_async(self, request, run_id):
        api_key = await self.authenticate(request)

        def read():
            return es.run_data(selectors.run_get(tenant=api_key.tenant, run_id=run_id))

        return JsonResponse(await pooled_sync_to_async(_call)(read))
