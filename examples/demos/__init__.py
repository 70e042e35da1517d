"""The runnable demos (``make demo``, ``make demo-providers``, ``make demo-mcp``, ``make demo-ui``)."""
