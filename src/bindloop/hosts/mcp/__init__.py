"""MCP hosts: a bindloop agent's tools served as an MCP server over ASGI (:mod:`.server`) and an MCP
server's tools from its URL (:mod:`.toolset`)."""
