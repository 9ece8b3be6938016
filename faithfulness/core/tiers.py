"""The evidence tier of a model's results and the reporting template of the
paper's section 6 (spec 2 and 6), filled from what the study holds, with every
missing item named. Pure: the service gathers an ``Evidence`` per model.

Tier [I] (spec 2): L0 when no trace has steps; L1 when traces have steps but SVR/VSR were not
measured; L2 when they were, qualified by the verifier kind ("mechanistic" is strong; an LLM
judge with its rubric or human labels is rubric-based and weaker). Add-on badges: IFR,
Anytime, Early answering, Halting. Without an inference-regime record on every trace the tier is "incomplete".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

MECHANISTIC, JUDGE, HUMAN = "mechanistic", "judge", "human"
TIER_TEXT = {
    0: "Level 0 — outcome only: the traces carry no reasoning steps, so only answer accuracy can be reported.",
    1: "Level 1 — trace present: reasoning steps exist but their validity is not measured; report them as "
       "trace reporting, not trace correctness.",
    2: "Level 2 — trace verified: step validity (SVR) and verified solutions (VSR) are measured.",
}
CAVEAT = ("Without validity (item 5), intervention faithfulness or an anytime profile (items 6–7) this is a "
          "task-performance evaluation, not evidence of reasoning.")
REGIME_KEYS = ("prompt_template", "temperature", "top_p", "seed", "k", "max_tokens", "tool_access", "model")


@dataclass
class Verifier:
    kind: str  # mechanistic | judge | human
    name: str  # "mechanistic v3", "gpt-4o-mini (prompt v2)", "human labels"
    validity: dict[str, Any]  # validity.Validity.as_dict()

    @property
    def strength(self) -> str:
        return "mechanistic (strong)" if self.kind == MECHANISTIC else "rubric-based (weaker)"


@dataclass
class Evidence:
    """What the study holds about one model."""

    model: str
    traces: int = 0
    with_regime: int = 0
    regime: dict[str, list[Any]] = field(default_factory=dict)  # key -> distinct values seen
    accuracy: float | None = None
    accuracy_n: int = 0  # traces whose answer was checked
    with_steps: int = 0
    steps_mean: float | None = None
    steps_median: float | None = None
    steps_max: int | None = None
    tokens_mean: float | None = None  # completion tokens, where the server reported them
    tool_calls: int | None = None  # None: the traces record no tool use
    verifiers: list[Verifier] = field(default_factory=list)
    ifr: dict[str, Any] | None = None  # {"rows": ifr_table rows, "per_trace", "mode", "settings", "skipped"}
    # {"grid", "acc", "auc", "n", "mode"}; a thinking-budget grid adds "thinking_tokens" and "auc_think"
    anytime: list[dict[str, Any]] = field(default_factory=list)
    # early answering, the newest run per continuation mode: {"mode", "grid", "traces", "aoc", "decided",
    # "decision_fraction", "after_share"} (faithfulness.summaries.early_summary)
    early: list[dict[str, Any]] = field(default_factory=list)
    halting: dict[str, Any] | None = None  # HaltingRates.as_dict() plus "basis"
    generator: str | None = None  # benchmark packaging: generator and seed
    checker_version: str | None = None
    artifact_format: str | None = None
    contamination: str | None = None
    code_version: str = ""


@dataclass
class Tier:
    model: str
    level: int
    complete: bool  # the inference regime is recorded on every trace
    qualifier: str  # the strongest verifier's kind at L2, else ""
    badges: list[str]
    text: str
    scope: str

    @property
    def label(self) -> str:
        return f"L{self.level}" + ("" if self.complete else " (incomplete)")


def tier(ev: Evidence) -> Tier:
    measured = [v for v in ev.verifiers if v.validity.get("n")]
    level = 2 if ev.with_steps and measured else (1 if ev.with_steps else 0)
    qualifier = ""
    if level == 2:
        qualifier = MECHANISTIC if any(v.kind == MECHANISTIC for v in measured) else measured[0].kind
    badges = [name for name, on in (("IFR", bool(ev.ifr and ev.ifr.get("rows"))), ("Anytime", bool(ev.anytime)),
                                    ("Early answering", bool(ev.early)), ("Halting", ev.halting is not None)) if on]
    complete = ev.traces > 0 and ev.with_regime == ev.traces
    if level == 2:
        best = next(v for v in measured if v.kind == qualifier)
        scope = f"Verified by {best.name} ({best.strength}) on {best.validity['n']} of {ev.with_steps} traces with steps."
    elif level == 1:
        scope = f"{ev.with_steps} of {ev.traces} traces have steps; measure their validity (a judge or labels) for L2."
    else:
        scope = f"{ev.traces} trace{'' if ev.traces == 1 else 's'}, none with steps."
    if not complete:
        scope += f" The inference regime is recorded on {ev.with_regime} of {ev.traces} traces: the tier is incomplete."
    return Tier(ev.model, level, complete, qualifier, badges, TIER_TEXT[level], scope)


# --------------------------------------------------------------------------
# The reporting template (section 6)


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _ci(r: dict | None) -> str:
    if not r or r.get("value") is None:
        return "—"
    ci = r.get("ci")
    return f"{r['value']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + f" (N={r['traces']})"


def template(ev: Evidence) -> dict[str, Any]:
    """The section-6 template: {"tier", "sections": [{"n", "title", "items": [{"name", "value", "missing"}]}]}.
    A missing item has value None and says what is missing and how to get it."""
    t = tier(ev)
    sections: list[dict[str, Any]] = []

    def section(n: int, title: str, items: list[tuple[str, Any, str]]) -> None:
        sections.append({"n": n, "title": title, "items": [
            {"name": name, "value": value, "missing": "" if value is not None else why} for name, value, why in items]})

    section(1, "Claim tier", [("tier", t.label, ""), ("add-ons", ", ".join(t.badges) or "none", ""),
                              ("verifier", t.qualifier or None, "no validity measured (L2 needs SVR/VSR)")])
    reg = ev.regime

    def regime_item(key: str) -> Any:
        vals = reg.get(key)
        if not vals:
            return None
        return ", ".join(_fmt(v) for v in vals[:5]) + (" …" if len(vals) > 5 else "")

    missing_regime = "not recorded in the traces' inference regime"
    section(2, "Inference regime", [
        ("traces with a regime record", f"{ev.with_regime} of {ev.traces}", ""),
        ("prompt format / template", regime_item("prompt_template"), missing_regime),
        ("temperature", regime_item("temperature"), missing_regime),
        ("top-p", regime_item("top_p"), missing_regime),
        ("seed", regime_item("seed"), missing_regime),
        ("k (pass@k)", regime_item("k"), missing_regime),
        ("maximum decoding tokens", regime_item("max_tokens"), missing_regime),
        ("maximum steps", regime_item("max_steps"), "no step cap is recorded (none was enforced)"),
        ("tool access", regime_item("tool_access"), missing_regime),
        ("model id and version", regime_item("model"), missing_regime),
    ])
    section(3, "Outcome (L0)", [
        ("accuracy", f"{ev.accuracy:.3f} (N={ev.accuracy_n})" if ev.accuracy is not None else None,
         "no trace has a checked answer"),
    ])
    section(4, "Trace descriptives (L1)", [
        ("traces with steps", f"{ev.with_steps} of {ev.traces}", ""),
        ("steps per trace (mean / median / max)",
         f"{_fmt(ev.steps_mean, 2)} / {_fmt(ev.steps_median, 1)} / {_fmt(ev.steps_max)}" if ev.with_steps else None,
         "no trace has steps"),
        ("trace length in tokens (mean)", _fmt(ev.tokens_mean, 1) if ev.tokens_mean is not None else None,
         "no token counts (imported traces carry none; generated ones do)"),
        ("tool calls", ev.tool_calls, "the traces record no tool use"),
    ])
    v_items: list[tuple[str, Any, str]] = []
    for v in ev.verifiers:
        d = v.validity
        v_items.append((f"{v.name} — {v.strength}",
                        f"SVR {_fmt(d['svr'])}, VSR {_fmt(d['vsr'])}, VSR∧correct {_fmt(d['vsr_and_correct'])} "
                        f"(addition, not in the paper); N={d['n']}, unverifiable {d['unverifiable']}, "
                        f"neutral policy: {d['policy']}", ""))
    if not v_items:
        v_items.append(("SVR / VSR", None, "no step labels (run the mechanistic judge, an LLM judge or annotate)"))
    section(5, "Validity (L2)", v_items)
    if ev.ifr and ev.ifr.get("rows"):
        rows = ev.ifr["rows"]
        f_items: list[tuple[str, Any, str]] = []
        for r in rows:
            if "invariance" in r:
                f_items.append((f"paraphrase invariance ({r['mode']}; control, not in IFR)", _ci(r["invariance"]), ""))
            else:
                f_items.append((f"IFR {r['kind']} ({r['mode']})",
                                f"strict {_ci(r['strict'])}; lenient {_ci(r['lenient'])}; "
                                f"monotone {_ci(r['monotone'])}; strict computed for {r['strict_computed']} of "
                                f"{r['interventions']}; answers forced {r.get('forced', 0)}; "
                                f"no answer even when forced {r.get('no_answer', 0)} (left out of IFR)", ""))
        f_items.append(("interventions per instance (at most)", ev.ifr.get("per_trace"), ""))
        f_items.append(("re-decoding settings", ev.ifr.get("settings"), ""))
        f_items.append(("traces without a causally relevant step (skipped)", ev.ifr.get("skipped", 0), ""))
    else:
        f_items = [("IFR", None, "no interventions run (the runs page, kind interventions, or manage.py interventions --study S --model M)")]
    for e in ev.early:  # a reasoning model's thought cut after each step, closed and the answer forced
        f_items.append((f"early answering, grid {e['grid']} ({e['mode']})", early_text(e), ""))
    section(6, "Faithfulness add-on", f_items)
    h_items: list[tuple[str, Any, str]] = []
    for a in ev.anytime:
        acc = ", ".join(f"{b}: {_fmt(x)}" for b, x in zip(a["labels"], a["acc"], strict=True))
        think = ""
        if "auc_think" in a:  # a thinking-budget grid: the thought cut at b thinking tokens
            used = ", ".join(_fmt(x, 1) for x in a["thinking_tokens"])
            think = f"; AUC_think {_fmt(a['auc_think'])} (mean thinking tokens used: {used})"
        h_items.append((f"{'thinking budgets' if think else 'grid'} {a['grid']} ({a['mode']})",
                        f"Acc(b) {acc}; AUC_any {_fmt(a['auc'])}{think} (N={a['n']})", ""))
    if not h_items:
        h_items.append(("anytime profile", None, "no anytime run (the runs page, kind anytime, or manage.py anytime --study S --model M --budgets ...)"))
    if ev.halting:
        h = ev.halting
        h_items.append((f"halting ({h.get('basis', '')})",
                        f"false STOP {h['false_stop']}/{h['instances']} = {_fmt(h['false_stop_rate'])}; "
                        f"late STOP {h['late_stop']}/{h['instances']} = {_fmt(h['late_stop_rate'])} "
                        f"(slack {h['slack']}; k* defined for {h['k_star_defined']})", ""))
    else:
        h_items.append(("false / late STOP", None, "no gold answer or skeleton defines k*"))
    section(7, "Halting add-on", h_items)
    section(8, "Benchmark packaging", [
        ("generator and seed", ev.generator, "no instance generator recorded (a fixed test set)"),
        ("checker version", ev.checker_version, "no checker recorded"),
        ("artifact format", ev.artifact_format, "no artifact format recorded"),
        ("contamination notes", ev.contamination, "no contamination notes recorded"),
    ])
    # [I] The halting rates alone (computable from any trace with a gold answer) do not lift the caveat.
    has_5_7 = t.level == 2 or any(b in t.badges for b in ("IFR", "Anytime", "Early answering"))
    section(9, "Caveat", [("caveat", "" if has_5_7 else CAVEAT, "")])
    missing = [f"{s['n']}. {i['name']}: {i['missing']}" for s in sections for i in s["items"] if i["value"] is None]
    best = next((v.validity for v in ev.verifiers if v.kind == t.qualifier and v.validity.get("n")), None)
    overall = next((r for r in (ev.ifr or {}).get("rows", []) if r["kind"] == "all causal kinds"), None)  # first mode
    headline = {"accuracy": ev.accuracy, "svr": best["svr"] if best else None, "vsr": best["vsr"] if best else None,
                "ifr_lenient": overall["lenient"]["value"] if overall else None,
                "ifr_ci": overall["lenient"]["ci"] if overall else None,
                "auc": ev.anytime[0]["auc"] if ev.anytime else None,
                "auc_think": next((a["auc_think"] for a in ev.anytime if "auc_think" in a), None),
                "early_aoc": ev.early[0]["aoc"] if ev.early else None,
                "decision_fraction": ev.early[0]["decision_fraction"] if ev.early else None,
                "after_share": ev.early[0]["after_share"] if ev.early else None,
                "false_stop_rate": ev.halting["false_stop_rate"] if ev.halting else None,
                "late_stop_rate": ev.halting["late_stop_rate"] if ev.halting else None}
    return {"model": ev.model, "tier": asdict(t) | {"label": t.label}, "sections": sections, "missing": missing,
            "headline": headline,
            "code_version": ev.code_version}


def early_text(e: dict[str, Any]) -> str:
    """An early-answering summary in a sentence: AOC, where the answer settles, and the thought after it."""
    return (f"AOC {_fmt(e['aoc'])} (N={e['traces']}); decision point at {_fmt(e['decision_fraction'])} of the "
            f"thought's steps (mean over the {e['decided']} traces whose answer settles); thought after it "
            f"{_fmt(e['after_share'])}")


def to_json(reports: list[dict[str, Any]]) -> str:
    return json.dumps(reports, indent=2, ensure_ascii=False, default=str)


def to_markdown(reports: list[dict[str, Any]], study: str = "") -> str:
    out = [f"# Evidence report{f': {study}' if study else ''}", ""]
    for rep in reports:
        t = rep["tier"]
        out += [f"## {rep['model']} — {t['label']}" + (f" ({t['qualifier']})" if t["qualifier"] else "")
                + (f" + {', '.join(t['badges'])}" if t["badges"] else ""), "", t["text"], "", t["scope"], ""]
        for s in rep["sections"]:
            out.append(f"### {s['n']}. {s['title']}")
            out.append("")
            for i in s["items"]:
                if s["n"] == 9 and not i["value"]:
                    out.append("- (items 5–7 present: no caveat)")
                    continue
                value = i["value"] if i["value"] is not None else f"**missing** — {i['missing']}"
                out.append(f"- {i['name']}: {value}")
            out.append("")
        if rep["missing"]:
            out += [f"Missing items ({len(rep['missing'])}): " + "; ".join(rep["missing"]), ""]
        out += [f"_Generated by {rep['code_version']}._", ""]
    return "\n".join(out)


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "∧": r"$\wedge$", "—": "---", "–": "--",
        "…": r"\dots{}"}


def tex_escape(text: Any) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_latex(reports: list[dict[str, Any]]) -> str:
    """One pasteable table: a row per model with the headline of each section, then the missing items."""
    head = ["Model", "Tier", "Accuracy", "SVR", "VSR", "IFR (lenient)", "AUC$_{\\text{any}}$", "Early AOC",
            "False/late STOP"]
    lines = [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{l" + "c" * (len(head) - 1) + "}",
             r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    notes = []
    for rep in reports:
        t, h = rep["tier"], rep["headline"]
        tier_cell = t["label"] + (f" ({t['qualifier']})" if t["qualifier"] else "") + (
            " + " + ", ".join(t["badges"]) if t["badges"] else "")
        ifr = _fmt(h["ifr_lenient"]) + (f" [{h['ifr_ci'][0]:.3f}, {h['ifr_ci'][1]:.3f}]" if h["ifr_ci"] else "")
        halt = f"{_fmt(h['false_stop_rate'])} / {_fmt(h['late_stop_rate'])}" if h["false_stop_rate"] is not None else None
        cells = (rep["model"], tier_cell, _fmt(h["accuracy"]), _fmt(h["svr"]), _fmt(h["vsr"]),
                 ifr if h["ifr_lenient"] is not None else None, _fmt(h["auc"]) if h["auc"] is not None else None,
                 _fmt(h.get("early_aoc")) if h.get("early_aoc") is not None else None, halt)
        lines.append(" & ".join("--" if c is None or c == "—" else tex_escape(c) for c in cells) + r" \\")
        if rep["missing"]:
            notes.append(f"{rep['model']}: " + "; ".join(rep["missing"]))
    lines += [r"\bottomrule", r"\end{tabular}",
              r"\caption{Evidence tiers (L0 outcome, L1 trace present, L2 trace verified) with add-ons; "
              r"IFR with 95\% bootstrap intervals over traces.}", r"\end{table}"]
    if notes:
        lines += ["% Missing items:"] + [f"% {tex_escape(n)}" for n in notes]
    return "\n".join(lines) + "\n"
