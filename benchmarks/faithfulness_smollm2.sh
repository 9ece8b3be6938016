#!/usr/bin/env bash
# The closing note's real run (docs/faithfulness.md, "Measured"): SmolLM2-135M-Instruct on llama-cpp-python over
# 20 GSM8K problems of the demo data -- generate, judge mechanistically, interventions in two continuation modes,
# anytime profiles on a token and a step grid, and the evidence reports (this model and the demo's four).
#
#   LLAMA_URL=http://127.0.0.1:8791/v1 DATABASE_URL=postgres://postgres@127.0.0.1:5432/ra_faithfulness \
#     benchmarks/faithfulness_smollm2.sh OUTDIR
set -euo pipefail
OUT=${1:-/tmp/faithfulness-smollm2}
mkdir -p "$OUT"
export DJANGO_DEBUG=1 CELERY_TASK_ALWAYS_EAGER=true
PY=".venv/bin/python manage.py"
STUDY="SmolLM2 GSM8K-20"
: "${LLAMA_URL:?set LLAMA_URL to the /v1 URL of the llama-cpp-python server}"

$PY migrate -v0
$PY demo --password demo-pass >/dev/null
# 20 problems of the demo study as problem records of a study of their own.
$PY shell -c "
import json
from annotation.models import Study
demo = Study.objects.get(name='GSM8K demo')
with open('$OUT/problems.jsonl', 'w') as f:
    for p in demo.problems.order_by('pk')[:20]:
        sk = p.approved_skeleton
        skeleton = [{'text': st.text, 'check': st.check_expr or None} for st in sk.steps.order_by('position')] if sk else []
        f.write(json.dumps({'kind': 'problem', 'problem_id': p.problem_id, 'statement': p.statement,
                            'gold_answer': p.gold_answer, 'skeleton': skeleton}) + '\n')
"
$PY shell -c "
from annotation import services
from django.contrib.auth import get_user_model
u = get_user_model().objects.get(username='demo')
services.do_get_or_create_study('$STUDY', owner=u)
"
$PY import_traces --study "$STUDY" --format reasonaudit "$OUT/problems.jsonl"
$PY add_model --study "$STUDY" --name smol --base-url "$LLAMA_URL" --model smollm2 --template zero-shot \
    --temperature 0 --seed 0 --max-tokens 256 --concurrency 2 --timeout 300 \
    --chat-template-file tests/runs/data/smollm2_chat_template.jinja
$PY probe_model --study "$STUDY" --model smol | tee "$OUT/probe.txt"
$PY generate --study "$STUDY" --model smol --wait | tee "$OUT/generate.txt"
$PY judge --study "$STUDY" --judge mechanistic --wait | tee "$OUT/judge.txt"
$PY interventions --study "$STUDY" --model smol --wait | tee "$OUT/interventions_completions.txt"
$PY interventions --study "$STUDY" --model smol --mode instructed --limit 10 --wait | tee "$OUT/interventions_instructed.txt"
$PY anytime --study "$STUDY" --model smol --budgets tokens:16,32,64,128,256,full --wait | tee "$OUT/anytime_tokens.txt"
$PY anytime --study "$STUDY" --model smol --budgets steps:1,2,3,5,8,full --wait | tee "$OUT/anytime_steps.txt"
$PY report --study "$STUDY" --model smol --format md --out "$OUT/report_smol.md"
$PY report --study "$STUDY" --model smol --format tex --out "$OUT/report_smol.tex"
$PY report --study "GSM8K demo" --format md --out "$OUT/report_demo.md"
$PY report --study "GSM8K demo" --format tex --out "$OUT/report_demo.tex"
$PY export --study "$STUDY" --what ifr --format csv --out "$OUT/ifr.csv"
$PY export --study "$STUDY" --what anytime-curve --format csv --out "$OUT/anytime_curve.csv"
