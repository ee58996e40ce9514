"""A tenant's webhook endpoints over REST (secret key): create (answers the signing
secret, once), list, read, update, delete, send a test event, and the delivery log.
Thin: each calls `tandem.webhooks.services` or `selectors`; another tenant's endpoint
is a 404 like a missing one. Nothing is delivered here: deliveries run on the CPU
tier's `webhooks` queue."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema

from tandem.db_pool import pooled_sync_to_async
from tandem.webhooks import selectors, services
from tenants.access import NotFound

from . import webhook_serializers as ws
from .base import AsyncAPIView
from .errors import ApiError
from .knowledge_views import NO_CONTENT, _only
from .openai_views import ERRORS

TAGS = ["webhooks"]


def _call(fn, *args):
    try:
        return fn(*args)
    except services.WebhookInputError as exc:
        raise ApiError(400, f"{exc.field}: {exc}", code="invalid_value", param=exc.field) from None
    except NotFound as exc:
        raise ApiError(404, str(exc), code=exc.code) from None


def _body(view, request, serializer) -> dict:
    body = view.json_body(request)
    _only(body, list(serializer().fields))
    for name, value in body.items():
        if value is None:  # null is no value for any of these fields: refused, not ignored
            raise ApiError(400, f"{name} may not be null.", code="invalid_value", param=name)
    return body


class EndpointListView(AsyncAPIView):
    @extend_schema(operation_id="listWebhooks", responses={200: ws.EndpointListSerializer, **ERRORS}, tags=TAGS)
    def get(self, request):
        raise NotImplementedError

    @extend_schema(operation_id="createWebhook", request=ws.EndpointCreateSerializer,
                   responses={201: ws.EndpointSerializer, **ERRORS}, tags=TAGS,
                   description="Add an endpoint. The answer carries its signing `secret`, shown this once.")
    def post(self, request):
        raise NotImplementedError

    async def get_async(self, request):
        api_key = await self.authenticate(request)

        def read():
            return [ws.endpoint_data(e) for e in selectors.endpoint_list(tenant=api_key.tenant)]

        return JsonResponse({"object": "list", "data": await pooled_sync_to_async(read)(), "has_more": False})

    async def post_async(self, request):
        api_key = await self.authenticate(request)
        body = _body(self, request, ws.EndpointCreateSerializer)

        def create():
            made = services.endpoint_create(tenant=api_key.tenant, url=body.get("url"), events=body.get("events"),
                                            description=body.get("description", ""))
            return ws.endpoint_data(made.endpoint, secret=made.secret)

        return JsonResponse(await pooled_sync_to_async(_call)(create), status=201)


class EndpointDetailView(AsyncAPIView):
    @extend_schema(operation_id="getWebhook", responses={200: ws.EndpointSerializer, **ERRORS}, tags=TAGS)
    def get(self, request, endpoint_id):
        raise NotImplementedError

    @extend_schema(operation_id="updateWebhook", request=ws.EndpointUpdateSerializer,
                   responses={200: ws.EndpointSerializer, **ERRORS}, tags=TAGS,
                   description="Change the URL, events or description; `enabled: true` turns a disabled "
                               "endpoint on again.")
    def patch(self, request, endpoint_id):
        raise NotImplementedError

    @extend_schema(operation_id="deleteWebhook", responses={**NO_CONTENT, **ERRORS}, tags=TAGS)
    def delete(self, request, endpoint_id):
        raise NotImplementedError

    async def get_async(self, request, endpoint_id):
        api_key = await self.authenticate(request)

        def read():
            return ws.endpoint_data(selectors.endpoint_get(tenant=api_key.tenant, endpoint_id=endpoint_id))

        return JsonResponse(await pooled_sync_to_async(_call)(read))

    async def patch_async(self, request, endpoint_id):
        api_key = await self.authenticate(request)
        body = _body(self, request, ws.EndpointUpdateSerializer)

        def update():
            endpoint = selectors.endpoint_get(tenant=api_key.tenant, endpoint_id=endpoint_id)
            return ws.endpoint_data(services.endpoint_update(endpoint=endpoint, **body))

        return JsonResponse(await pooled_sync_to_async(_call)(update))

    async def delete_async(self, request, endpoint_id):
        api_key = await self.authenticate(request)

        def delete():
            services.endpoint_delete(endpoint=selectors.endpoint_get(tenant=api_key.tenant, endpoint_id=endpoint_id))

        await pooled_sync_to_async(_call)(delete)
        return HttpResponse(status=204)


class EndpointTestView(AsyncAPIView):
    @extend_schema(operation_id="testWebhook", request=None, responses={202: ws.DeliverySerializer, **ERRORS},
                   tags=TAGS, description="Send a `webhook.test` event to this endpoint; the answer is its "
                                          "delivery, queued.")
    def post(self, request, endpoint_id):
        raise NotImplementedError

    async def post_async(self, request, endpoint_id):
        api_key = await self.authenticate(request)

        def test():
            endpoint = selectors.endpoint_get(tenant=api_key.tenant, endpoint_id=endpoint_id)
            return ws.delivery_data(services.endpoint_test(endpoint=endpoint))

        return JsonResponse(await pooled_sync_to_async(_call)(test), status=202)


class EndpointDeliveriesView(AsyncAPIView):
    @extend_schema(operation_id="listWebhookDeliveries", responses={200: ws.DeliveryListSerializer, **ERRORS},
                   tags=TAGS, description="The endpoint's latest deliveries, newest first.")
    def get(self, request, endpoint_id):
        raise NotImplementedError

    async def get_async(self, request, endpoint_id):
        api_key = await self.authenticate(request)

        def read():
            endpoint = selectors.endpoint_get(tenant=api_key.tenant, endpoint_id=endpoint_id)
            return [ws.delivery_data(d) for d in selectors.delivery_list(endpoint=endpoint)]

        return JsonResponse({"object": "list", "data": await pooled_sync_to_async(_call)(read), "has_more": False})
