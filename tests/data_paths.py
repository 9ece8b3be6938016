"""Where the tests find real data: the copy bundled with the project, so a
fresh clone runs every test (nothing skips for want of ../shared)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GSM8K_SOLUTIONS = ROOT / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
GSM8K_TEST_HEAD = ROOT / "tests" / "data" / "gsm8k" / "test_head.jsonl"
ABSTRACTION_SAMPLE = ROOT / "tests" / "data" / "abstraction" / "gpt-4o-mini"
ABSTRACTION_LAYOUT = ROOT / "tests" / "data" / "abstraction" / "published-layout.txt"
PROCESSBENCH_GSM8K = ROOT / "tests" / "data" / "processbench" / "gsm8k.json"
PROCESSBENCH_MATH_HEAD = ROOT / "tests" / "data" / "processbench" / "math_head40.json"
