"""Durable agent runs on Temporal (:mod:`.workflow`; extra ``bindloop[temporal]``)."""
