"""ASGI apps: the chat app for the AI SDK and AG-UI (:mod:`.chat`), the runner that drives an agent
for it (:mod:`.agent`), the event logs its runs write (:mod:`.run_logs`), what a run keeps to be
continued after its process died (:mod:`.replay`) and the calls waiting for approval in a file every
process shares (:mod:`.approvals`)."""
