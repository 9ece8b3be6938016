"""Pure formulas of paper 000 (docs/faithfulness.md): no ORM, no I/O.

selection  which steps are causally relevant (the intervention targets)
edits      the edited prefixes of value_flip, step_ablation, paraphrase, tool_result
ifr        f strict / lenient / monotone, IFR and the paraphrase invariance rate
anytime    budget grids, truncation, Acc(b), AUC_any
early      early answering in the thought (AOC, decision point), thinking budgets (AUC_think)
halting    k*, false-STOP and late-STOP rates
validity   SVR / VSR with an explicit neutral policy
tiers      the evidence tier and the reporting template of section 6
"""
