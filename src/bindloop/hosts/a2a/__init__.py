"""A2A: a bindloop agent served as an A2A 1.0 agent over ASGI (:mod:`.server`) and the client that
calls one (:mod:`.client`)."""
