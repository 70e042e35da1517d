"""bindloop on Cloudflare Python Workers: the session Durable Object, its stores, run continuation
by alarm and the chat routes, as a library a Worker's own code subclasses.

- :mod:`~bindloop.hosts.workers.app`: ``ChatWorker`` (the ``fetch`` entrypoint and its routes),
  ``Session`` (one conversation's Durable Object), ``RateLimiter``, ``Receipts``, ``McpTokens``.
- :mod:`~bindloop.hosts.workers.agent`: the agent's config from the Worker's env and one run
  (plain Python).
- :mod:`~bindloop.hosts.workers.sessions`, :mod:`~bindloop.hosts.workers.frontends`: the
  ``/v1`` sessions and the AI SDK / AG-UI routes (what a resumed stream is sent is
  :mod:`bindloop.hosts.chat.follow`'s, shared with the ASGI app).
- :mod:`~bindloop.hosts.workers.checkpoints`, :mod:`~bindloop.hosts.workers.receipts`,
  :mod:`~bindloop.hosts.workers.limits`, :mod:`~bindloop.hosts.workers.oauth_store`: bindloop's
  store ports over Durable Objects.

The modules that name the Workers runtime (``js``, ``workers``, ``pyodide``) import only inside
workerd; this package itself imports nothing.
"""
