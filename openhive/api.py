"""The REST API root: /api/v1/. Each app contributes a router."""

from ninja import NinjaAPI

api = NinjaAPI(title="OpenHive API", version="1", urls_namespace="api-v1")
