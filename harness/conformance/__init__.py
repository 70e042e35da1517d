"""bindloop's conformance suite: loop scenarios as JSON data and a pure runner
(``conformance.runner``) whose report must be byte-identical on every runtime bindloop supports."""
