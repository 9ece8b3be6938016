"""The abstraction prompts as prompt templates of the study (subjects.PromptTemplate) and rendering an
item's chat from them (the texts of abstraction.core.prompts are the built-in version 1)."""

from __future__ import annotations

from typing import Any

from abstraction.core import generators as gen
from abstraction.core import prompts
from abstraction.models import Item
from annotation.models import Study
from subjects import prompts as subject_prompts
from subjects import services as subject_services
from subjects.models import PromptTemplate

# The built-in prompt templates (subjects.PromptTemplate, versioned per study): the system prompts of §5.
TEMPLATES = {"abstraction-dp": prompts.SYSTEM_DP, "abstraction-cot": prompts.SYSTEM_COT,
             "abstraction-ma-dp": prompts.SYSTEM_MA_DP}


def ensure_templates(study: Study) -> dict[str, PromptTemplate]:
    """The study's abstraction prompt templates, created (version 1) on first use; the GSM8K CoT exemplars
    ride on the CoT template. A study may save new versions of them with ``add_template``."""
    out = {}
    for name, text in TEMPLATES.items():
        current = PromptTemplate.objects.filter(study=study, name=name).order_by("-version").first()
        if current is None:
            exemplars = list(subject_prompts.gsm8k_exemplars()) if name == "abstraction-cot" else None
            current = subject_services.do_save_template(study, name, text, exemplars=exemplars, system=True)
        out[name] = current
    return out


def prompt_texts(study: Study) -> dict[str, Any]:
    t = ensure_templates(study)
    return {"system_dp": t["abstraction-dp"].template, "system_cot": t["abstraction-cot"].template,
            "system_ma": t["abstraction-ma-dp"].template, "gsm8k_exemplars": t["abstraction-cot"].exemplars,
            "templates": {name: tpl.version for name, tpl in t.items()}}


def render(inst: gen.Instance, mode: str, texts: dict[str, Any]) -> list[dict[str, str]]:
    return prompts.messages(inst, mode, system_dp=texts["system_dp"], system_cot=texts["system_cot"],
                            system_ma=texts["system_ma"], gsm8k_exemplars=texts["gsm8k_exemplars"])


def instance_of(item: Item) -> gen.Instance:
    return gen.Instance(item.category, item.sub_dataset, item.task, item.variant, item.instance,
                        tuple(tuple(e) for e in item.examples), item.question, item.answer, item.operator, item.hint)
