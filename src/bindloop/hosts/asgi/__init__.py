"""The chat host's ASGI binding: the app serving the AI SDK and AG-UI (:mod:`.chat`), the event
logs its runs write in a SQLite file (:mod:`.run_logs`) and the calls waiting for approval in a file
every process shares (:mod:`.approvals`). What a run does, whichever binding serves it, is in
:mod:`bindloop.hosts.chat`."""
