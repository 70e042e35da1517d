"""The chat host's protocol logic, shared by its two bindings -- the ASGI app on CPython
(:mod:`bindloop.hosts.asgi.chat`) and the Cloudflare Worker (:mod:`bindloop.hosts.workers`). No
I/O and no binding in it: each binding reads its own store and request, asks these modules what
to do, and writes what they give it.

- :mod:`.run`: what a run is asked to do (:class:`~.run.ChatInput`), the runner that does it, and
  the driver that takes it through one protocol's encoder to the frames the binding writes.
- :mod:`.agent`: the runner over bindloop's agent API (``agent_runner``), with the chat's pending
  approvals and tool receipts.
- :mod:`.replay`: what a run keeps of its encoder's inputs so a continuation writes the same frames.
- :mod:`.follow`: what a resumed stream sends of a run's log while the run it follows may have
  died (its lease still looking live) and been continued elsewhere.
- :mod:`.bodies`: the bounds on a request body, and the refusal a client gets past them.
- :mod:`.access`: who is asking -- the request an ``authorize`` hook sees, its refusal, and the
  key that scopes a chat to its owner.
- :mod:`.errors`: what a client is told of a failed run.
- :mod:`.quota`: the bound on one run's log, and the error that stops a run at it.
"""
