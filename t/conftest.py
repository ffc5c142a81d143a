"""Shared test fixtures: where the conformance corpora live."""

from __future__ import annotations

from pathlib import Path

import pytest

from .shared import CONFORMANCE, REPO, SHARED

__all__ = ["CONFORMANCE", "REPO", "SHARED", "shared_path"]


def shared_path(*parts: str) -> Path:
    """A path under ../shared, skipping the test with a clear reason if absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"conformance corpus not found at {path} (../shared is absent)")
    return path
