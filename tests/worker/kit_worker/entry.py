"""The test-only Worker of the Durable Object store kit: the library's routes plus ``/_kit/...``
(stores_kit_route.py), served with the template's wrangler.jsonc by tests/worker/
test_workerd_store_kit.py and bench/do_stores.py; never deployed."""

from bindloop.hosts.workers import app
from bindloop.hosts.workers.app import McpTokens, RateLimiter, Receipts, Session  # noqa: F401
from stores_kit_route import add_kit_routes

ROUTES = app.ROUTES.copy()
add_kit_routes(ROUTES)


class Default(app.ChatWorker):
    routes = ROUTES
