"""Stores: SQLite (:mod:`.sqlite`), Postgres (:mod:`.postgres`) and Redis (:mod:`.redis`) answering the
core's checkpoint, receipt and limit store protocols, and the process runner of the store
conformance kit (:mod:`.processes`)."""
