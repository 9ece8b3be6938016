"""Recompute scores when the data they depend on changes."""

from __future__ import annotations

from annotation.models import Study


def on_data_changed(sender, study: Study, reason: str = "", **kwargs) -> None:
    """Receiver of ``annotation.signals.data_changed`` (imports, label saves,
    adjudications, judge runs): one debounced recompute after commit."""
    from scoring import services

    services.request_recompute(study, reason=reason or "data changed", profiles=kwargs.get("profiles"))
