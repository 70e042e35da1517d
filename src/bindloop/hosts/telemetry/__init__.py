"""Telemetry: OpenTelemetry spans (:mod:`.otel`) and stdlib ``logging`` of tool errors (:mod:`.logs`)."""
