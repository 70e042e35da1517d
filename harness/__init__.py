"""Test tooling that is not shipped: Python fixtures (:mod:`harness.fixtures`), the cross-runtime
harnesses and the conformance runner."""
