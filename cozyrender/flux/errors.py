"""The one error of `cozyrender flux`."""

from __future__ import annotations


class FluxError(Exception):
    """Input cozyrender cannot turn into patches, or a HelmRelease file it cannot
    edit; str() is one line for the user, naming the file (and line) when there is one."""
