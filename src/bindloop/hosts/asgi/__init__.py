"""ASGI apps: the chat app for the AI SDK and AG-UI (:mod:`.chat`), the runner that drives an agent
for it (:mod:`.agent`) and the event logs its runs write (:mod:`.run_logs`)."""
