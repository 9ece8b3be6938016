"""Judge providers behind one interface (base.JudgeProvider). The OpenAI
client is imported only when an LLM judge runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from judges.providers.base import (
    CachedAnswer,
    CallRecord,
    Control,
    FatalJudgeError,
    JudgeProvider,
    LabelOut,
    NoStop,
    NullStore,
    ResponseStore,
    TraceInput,
    TraceOutcome,
)

if TYPE_CHECKING:
    from judges.models import JudgeConfig

__all__ = [
    "CachedAnswer", "CallRecord", "Control", "FatalJudgeError", "JudgeProvider", "LabelOut", "NoStop",
    "NullStore", "ResponseStore", "TraceInput", "TraceOutcome", "get_provider", "provider_class",
]


def provider_class(config: JudgeConfig) -> type[JudgeProvider]:
    if config.provider == "mechanistic":
        from judges.providers.mechanistic.provider import MechanisticProvider

        return MechanisticProvider
    if config.provider == "llm":
        from judges.providers.openai_compat import OpenAICompatibleProvider

        return OpenAICompatibleProvider
    if config.provider == "fake":
        from judges.providers.fake import FakeProvider

        return FakeProvider
    raise ValueError(f"unknown judge provider {config.provider!r}")


def get_provider(config: JudgeConfig, store: ResponseStore | None = None, *, force: bool = False) -> JudgeProvider:
    return provider_class(config)(config, store, force=force)
