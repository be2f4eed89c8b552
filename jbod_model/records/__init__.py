"""Metadata records (typed and opaque), their JSON and binary codecs."""

from __future__ import annotations
