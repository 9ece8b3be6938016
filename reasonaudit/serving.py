"""What a web server process does once, after Django is set up and before its first request."""

from __future__ import annotations

import gc

from django.urls import get_resolver


def ready_to_serve() -> None:
    """Import every URL module and view now, then freeze what is loaded out of the garbage collector.

    A web process holds a couple of hundred thousand long-lived objects (Django, our apps, pandas,
    sympy, plotly, NumPy...) that are never garbage. Python's oldest-generation collection walks
    all of them whenever enough allocations accumulate, and the request that happens to trigger it
    waits: 140-170 ms measured in the middle of a 100 ms search (docs/benchmarks.md, "Search").
    ``gc.freeze()`` moves them to a permanent generation the collector skips; objects made later
    are collected as before. Loading the URL modules first puts them among the frozen and spares the
    first request their import (seconds)."""
    get_resolver().url_patterns  # noqa: B018 - imports every URL module and the views they name
    gc.freeze()
