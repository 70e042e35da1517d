"""A2A: a bindloop agent served as an A2A 1.0 agent over ASGI and the client that calls one.

- :mod:`.server` -- :class:`~bindloop.hosts.a2a.server.A2aServer`: the ASGI app and its JSON-RPC
  routes (send, get, list, cancel, subscribe), run admission and each task's run;
- :mod:`._card` -- the agent card it publishes;
- :mod:`._tasks` -- its tasks and contexts, by identity;
- :mod:`._streaming` -- a run's updates folded into its task, and a task's SSE stream;
- :mod:`.client` -- the client of another A2A agent.
"""
