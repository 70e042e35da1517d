"""Transports: the httpx client on CPython (:mod:`.httpx`) and the JS ``fetch`` binding on Pyodide and
Workers (:mod:`.js_fetch`), each answering the wire's ``HttpTransport`` port."""
