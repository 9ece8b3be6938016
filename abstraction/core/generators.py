"""Seeded generators of every sub-dataset (spec §4.2, the repository's forms).

One instance = one rule (operation), up to 50 worked examples using it and one question. Each
sub-dataset has its own random stream, ``Random(f"{seed}:{task}")``, drawn again for every sub-dataset
as the repository resets its seed; SR variants are built from the *same* raw instance as the EC
sub-dataset of their task (same stream) with a remap drawn from ``Random(f"{seed}:{task}:{i}:{variant}")``,
so instance i of every variant is the same underlying problem and shares its id.

Question texts carry their trailing " =" (it is remapped with the rest in the SR variants)."""

from __future__ import annotations

import datetime as dt
import math
import random
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from abstraction.core import remap as rm

GENERATOR_VERSION = "abstraction-gen/1"
DEFAULT_SEED = 42
N_ITEMS = 96
N_EXAMPLES = 50
CATEGORIES = ("BC", "EC", "NBR", "MA", "SMA", "SR")
CATEGORY_NAMES = {"BC": "Basic Computation", "EC": "Extended Calculation", "NBR": "Number Base Reasoning",
                  "MA": "Math Application", "SMA": "Symbolic Math Abstraction", "SR": "Symbolic Reasoning"}
SMA_MODES = ("paper", "repo")
LEVEL_OF = {"BC": "l0_chat", "EC": "l1_chat", "NBR": "l2_chat", "SMA": "l3_chat", "SR": "l4_chat", "MA": "l6_chat"}


@dataclass(frozen=True)
class Instance:
    category: str
    sub_dataset: str
    task: str  # the paired task type ("fixed_len_chat_bit"); = sub_dataset outside EC/SR
    variant: str  # raw | all | num | op
    index: int  # 0-based; shared by the raw instance and its remapped variants
    examples: tuple[tuple[str, str], ...]
    question: str
    answer: str
    operator: str = ""
    hint: str = ""
    remap: rm.Remap | None = None
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        return f"{self.sub_dataset}/{self.index}"

    def texts(self) -> list[str]:
        return [t for pair in self.examples for t in pair] + [self.question, self.answer]


# --------------------------------------------------------------------------- helpers

def _int_pool(rng: random.Random, size: int = 1000) -> list[int]:
    """Distinct integers: a digit count uniform in 1..9, then a value with that many digits."""
    out: dict[int, None] = {}
    while len(out) < size:
        d = rng.randint(1, 9)
        out[rng.randint(10 ** (d - 1), 10 ** d - 1)] = None
    return list(out)


def _draw_examples(rng: random.Random, ctx: dict, op: str, draw: Callable, question: tuple[str, str],
                   ) -> tuple[tuple[str, str], ...]:
    """Up to 50 distinct examples, none equal to the question: draws go on (at most 10 x 50) past
    repeats, so only tasks with few possible questions (var_len bits with small l) have fewer (§4.3)."""
    seen = {question[0]}
    out: list[tuple[str, str]] = []
    for _ in range(10 * N_EXAMPLES):
        q, a = draw(rng, ctx, op)
        if q not in seen:
            seen.add(q)
            out.append((q, a))
            if len(out) == N_EXAMPLES:
                break
    return tuple(out)


def _family(name: str, category: str, task: str, ops: Sequence[str], setup: Callable[[random.Random], dict],
            draw: Callable[[random.Random, dict, str], tuple[str, str]], *, n: int = N_ITEMS,
            hint: str = "") -> Callable[[int], list[Instance]]:
    def make(seed: int) -> list[Instance]:
        rng = random.Random(f"{seed}:{task}")
        shared = setup(rng)
        items = []
        for i in range(n):
            op = rng.choice(list(ops))
            per_instance = shared.get("per_instance")
            ctx = {**shared, **(per_instance(rng) if per_instance else {})}
            question = draw(rng, ctx, op)
            examples = _draw_examples(rng, ctx, op, draw, question)
            items.append(Instance(category, name, task, "raw", i, examples, question[0], question[1], op, hint))
        return items
    return make


# --------------------------------------------------------------------------- BC

def _bc(op: str, name: str) -> Callable[[int], list[Instance]]:
    def draw(rng: random.Random, ctx: dict, _op: str) -> tuple[str, str]:
        a, b = rng.choice(ctx["pool"]), rng.choice(ctx["pool"])
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]
        return f"{a} {op} {b} =", str(value)
    return _family(name, "BC", name, [op], lambda r: {"pool": _int_pool(r)}, draw)


# --------------------------------------------------------------------------- EC: bits

BIT_OPS = ("binary_and", "binary_or", "binary_xor", "binary_not")
SHIFT_OPS = ("logical_left_shift", "logical_right_shift", "arithmetic_left_shift", "arithmetic_right_shift",
             "circular_left_shift", "circular_right_shift")
BITOP_OPS = ("check_bit", "set_bit", "clear_bit", "toggle_bit")


def _bits(rng: random.Random, length: int) -> str:
    # Fixed length: format(i, '08b') with i in 0..127; variable length l: the first l characters of one.
    return format(rng.randint(0, 127), "08b")[:length]


def _bit_setup(fixed: bool) -> Callable[[random.Random], dict]:
    def setup(_rng: random.Random) -> dict:
        return {"per_instance": (lambda r: {"l": 8}) if fixed else (lambda r: {"l": r.randint(1, 8)})}
    return setup


def _bit_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    n = ctx["l"]
    a = _bits(rng, n)
    if op == "binary_not":
        return f"binary_not {a} =", "".join("1" if c == "0" else "0" for c in a)
    b = _bits(rng, n)
    x, y = int(a, 2), int(b, 2)
    value = {"binary_and": x & y, "binary_or": x | y, "binary_xor": x ^ y}[op]
    return f"{a} {op} {b} =", format(value, f"0{n}b")


def shift(s: str, op: str, k: int) -> str:
    n = len(s)
    if op in ("logical_left_shift", "arithmetic_left_shift"):
        return (s + "0" * k)[k:k + n]
    if op == "logical_right_shift":
        return ("0" * k + s)[:n]
    if op == "arithmetic_right_shift":
        return (s[0] * k + s)[:n]
    if op == "circular_left_shift":
        return s[k:] + s[:k]
    return s[n - k:] + s[:n - k]  # circular_right_shift


def _shift_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    a = _bits(rng, ctx["l"])
    k = rng.randint(0, len(a) - 1)
    return f"{a} {op} {k} =", shift(a, op, k)


def bit_op(s: str, op: str, k: int) -> str:
    i = len(s) - 1 - k  # bit k has value 2^k: counted from the right
    if op == "check_bit":
        return str(s[i] == "1")
    new = {"set_bit": "1", "clear_bit": "0", "toggle_bit": "0" if s[i] == "1" else "1"}[op]
    return s[:i] + new + s[i + 1:]


def _bitop_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    a = _bits(rng, ctx["l"])
    k = rng.randint(0, len(a) - 1)
    return f"{a} {op} {k} =", bit_op(a, op, k)


# --------------------------------------------------------------------------- EC: strings, sets, lists

def _rand_str(rng: random.Random, length: int = 40) -> str:
    alphabet = string.ascii_lowercase if rng.random() < 0.5 else "abcdefgh"
    return "".join(rng.choice(alphabet) for _ in range(length))


def _str_setup(fixed: bool) -> Callable[[random.Random], dict]:
    def setup(_rng: random.Random) -> dict:
        return {"per_instance": (lambda r: {"l": 40}) if fixed else (lambda r: {"l": r.randint(1, 40)})}
    return setup


def _str_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    s = _rand_str(rng)[:ctx["l"]]
    c = rng.choice("abcdefgh")
    return f"{s} {op} {c} =", str(s.count(c))


STROP_OPS = ("reverse", "concatenate", "repeat", "get_length")


def _strop_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    s = _rand_str(rng)
    if op == "concatenate":
        t = _rand_str(rng)
        return f"{s} concatenate {t} =", s + t
    value = {"reverse": s[::-1], "repeat": s * 2, "get_length": str(len(s))}[op]
    return f"{op} {s} =", value


def is_subsequence(t: str, s: str) -> bool:
    it = iter(s)
    return all(c in it for c in t)


def _substr_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    s = "".join(rng.choice(string.ascii_lowercase) for _ in range(40))
    if rng.random() < 0.5:  # [I] half the targets are drawn from s in order, so both answers occur
        t = "".join(s[i] for i in sorted(rng.sample(range(40), 4)))
    else:
        t = "".join(rng.choice(string.ascii_lowercase) for _ in range(4))
    return f"{s} {op} {t} =", "T" if is_subsequence(t, s) else "F"


def fmt_set(values: set[int]) -> str:
    return "{" + ", ".join(str(v) for v in sorted(values)) + "}" if values else "{}"


def _set_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    a = set(rng.sample(range(7), rng.randint(1, 6)))
    b = set(rng.sample(range(7), rng.randint(1, 6)))
    value = {"intersection": a & b, "union": a | b, "difference": a - b}[op]
    return f"{fmt_set(a)} {op} {fmt_set(b)} =", fmt_set(value)


def _list_pool(rng: random.Random) -> dict:
    pool: dict[tuple[int, ...], None] = {}
    while len(pool) < 100:
        pool[tuple(rng.randint(0, 9) for _ in range(8))] = None
    return {"pool": [list(x) for x in pool]}


def _list_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    xs = rng.choice(ctx["pool"])
    if op == "filter":
        t = rng.randint(0, 8)
        return f"filter {xs} {t} =", str([x for x in xs if x > t])
    value = sorted(xs) if op == "sort" else sorted(set(xs))
    return f"{op} {xs} =", str(value)


def _list_cnt_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    xs = rng.choice(ctx["pool"])
    if op == "min":
        value: object = min(xs)
    elif op == "max":
        value = max(xs)
    elif op == "median":
        value = sorted(xs)[len(xs) // 2]
    else:  # majority: every mode, ascending
        top = max(xs.count(x) for x in xs)
        value = sorted({x for x in xs if xs.count(x) == top})
    return f"{op} {xs} =", str(value)


def _square_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    a = rng.choice(ctx["pool"])
    return f"square root {a} =", str(math.sqrt(a))


def _date(rng: random.Random) -> dt.date:
    start, end = dt.date(2010, 1, 1), dt.date(2025, 12, 31)
    return start + dt.timedelta(days=rng.randint(0, (end - start).days))


def _dates_draw(rng: random.Random, ctx: dict, op: str) -> tuple[str, str]:
    a, b = _date(rng), _date(rng)
    return (f"[{a.year}, {a.month}, {a.day}] days_between_dates [{b.year}, {b.month}, {b.day}] =",
            str(abs((a - b).days)))


# --------------------------------------------------------------------------- NBR

def to_base(value: int, base: int) -> str:
    if value == 0:
        return "0"
    sign, value, digits = "-" if value < 0 else "", abs(value), []
    while value:
        value, r = divmod(value, base)
        digits.append(str(r))
    return sign + "".join(reversed(digits))


def _base_operand(rng: random.Random, base: int) -> str:
    digits = "".join(str(rng.randint(0, base - 1)) for _ in range(rng.randint(1, 8)))
    return digits.lstrip("0") or "0"


def base_hint(base: int) -> str:
    return f"\nHint: This is base {base} operation.\n"


def _nbr(op: str, base: int) -> Callable[[int], list[Instance]]:
    word = {"+": "add", "-": "sub", "*": "mul"}[op]
    name = f"chat_{word}_base{base}_raw_dataset"

    def draw(rng: random.Random, ctx: dict, _op: str) -> tuple[str, str]:
        a, b = _base_operand(rng, base), _base_operand(rng, base)
        x, y = int(a, base), int(b, base)
        return f"{a} {op} {b} =", to_base({"+": x + y, "-": x - y, "*": x * y}[op], base)
    return _family(name, "NBR", name, [op], lambda r: {}, draw, hint=base_hint(base))


def _conversion(base: int) -> Callable[[int], list[Instance]]:
    name = f"chat_base{base}_raw_dataset"

    def draw(rng: random.Random, ctx: dict, _op: str) -> tuple[str, str]:
        d = rng.randint(1, 4)
        a = rng.randint(10 ** (d - 1), 10 ** d - 1)
        return f"{a} to base {base} =", to_base(a, base)
    return _family(name, "NBR", name, ["to base"], lambda r: {}, draw, hint=base_hint(base))


# --------------------------------------------------------------------------- SMA

SMA_FUNCTIONS = ("linear", "quadratic", "sine", "cosine", "square_wave", "triangle_wave", "sawtooth_wave")


def sma_value(kind: str, params: tuple[int, ...], x: int) -> str:
    if kind == "linear":
        a, b = params[:2]
        return str(a * x + b)
    if kind == "quadratic":
        a, b, c = params[:3]
        return str(a * x * x + b * x + c)
    if kind == "sine":
        return str(params[0] * math.sin(params[1] * x))
    if kind == "cosine":
        return str(params[0] * math.cos(params[1] * x))
    f = params[0]
    p = 10 / f
    if kind == "square_wave":
        return "1" if math.sin(2 * math.pi * (f / 10) * x) >= 0 else "-1"
    xp = x % p
    if kind == "triangle_wave":
        return str(4 * xp / p - 1 if xp < p / 2 else 3 - 4 * xp / p)
    return str(2 * xp / p - 1)  # sawtooth_wave


def _sma(kind: str, mode: str) -> Callable[[int], list[Instance]]:
    # The published folder is chat_<kind>_dataset; the task (and the seed of
    # its random stream) stays chat_<kind>, so the items are those generated before.
    name = f"chat_{kind}_dataset"
    task = f"chat_{kind}"

    def setup(rng: random.Random) -> dict:
        pool = list(range(1, 100))
        return {"xs": pool, "per_instance": lambda r: {"params": tuple(r.sample(range(1, 10), 3))}}

    def draw(rng: random.Random, ctx: dict, _op: str) -> tuple[str, str]:
        # repo mode: new parameters for every example (spec §10 A1); paper mode: one function per instance.
        params = tuple(rng.sample(range(1, 10), 3)) if mode == "repo" else ctx["params"]
        x = rng.choice(ctx["xs"])
        return f"fun {x} =", sma_value(kind, params, x)
    make = _family(name, "SMA", task, ["fun"], setup, draw)

    def wrapped(seed: int) -> list[Instance]:
        return [replace(i, meta={"sma_mode": mode}) for i in make(seed)]
    return wrapped


# --------------------------------------------------------------------------- registry

EC_TASKS: dict[str, tuple[Sequence[str], Callable, Callable]] = {
    "fixed_len_chat_bit": (BIT_OPS, _bit_setup(True), _bit_draw),
    "var_len_chat_bit": (BIT_OPS, _bit_setup(False), _bit_draw),
    "fixed_len_chat_bit_shift": (SHIFT_OPS, _bit_setup(True), _shift_draw),
    "var_len_chat_bit_shift": (SHIFT_OPS, _bit_setup(False), _shift_draw),
    "fixed_len_chat_bitop": (BITOP_OPS, _bit_setup(True), _bitop_draw),
    "var_len_chat_bitop": (BITOP_OPS, _bit_setup(False), _bitop_draw),
    "fixed_len_chat_str": (("conut",), _str_setup(True), _str_draw),
    "var_len_chat_str": (("conut",), _str_setup(False), _str_draw),
    "fixed_len_chat_strop": (STROP_OPS, lambda r: {}, _strop_draw),
    "var_len_chat_strop": (STROP_OPS, lambda r: {}, _strop_draw),
    "fixed_len_chat_substr": (("contains(in order)",), lambda r: {}, _substr_draw),
    "var_len_chat_set": (("intersection", "union", "difference"), lambda r: {}, _set_draw),
    "var_len_chat_list": (("sort", "filter", "deduplicate"), _list_pool, _list_draw),
    "var_len_chat_list_cnt": (("min", "max", "median", "majority"), _list_pool, _list_cnt_draw),
}
PAIRED_TASKS = tuple(EC_TASKS)  # the 14 task types with SR variants
EC_EXTRA = {  # keyed by the published folder name
    "chat_square_dataset": (("square root",), lambda r: {"pool": _int_pool(r)}, _square_draw),
    "var_len_chat_data_raw_dataset": (("days_between_dates",), lambda r: {}, _dates_draw),
}
# Their task names (also the seed of their random streams), as before the
# folder names were aligned with the published layout (issue 23).
_EXTRA_TASK = {"chat_square_dataset": "chat_square_dataset", "var_len_chat_data_raw_dataset": "var_len_chat_data_raw"}


def raw_name(task: str) -> str:
    return f"{task}_raw_dataset"


def variant_name(task: str, variant: str) -> str:
    return f"{task}_dataset" if variant == "all" else f"{task}_{variant}_dataset"


def _ec_raw(task: str) -> Callable[[int], list[Instance]]:
    ops, setup, draw = EC_TASKS[task]
    return _family(raw_name(task), "EC", task, ops, setup, draw)


def _ec_extra(name: str) -> Callable[[int], list[Instance]]:
    ops, setup, draw = EC_EXTRA[name]
    return _family(name, "EC", _EXTRA_TASK[name], ops, setup, draw)


BC_SUBS = {"chat_add_dataset": "+", "chat_sub_dataset": "-", "chat_mul_dataset": "*", "chat_div_dataset": "/"}


def sub_datasets(category: str) -> list[str]:
    """The published sub-dataset folder names of a category (MA: the one GSM8K set), exactly as the
    benchmark's output tree names them (tests/abstraction: the whole published layout)."""
    if category == "BC":
        return list(BC_SUBS)
    if category == "EC":
        return [raw_name(t) for t in PAIRED_TASKS] + list(EC_EXTRA)
    if category == "NBR":
        return ([f"chat_{o}_base{b}_raw_dataset" for o in ("add", "sub", "mul") for b in (3, 4, 5)]
                + [f"chat_base{b}_raw_dataset" for b in (3, 4, 5)])
    if category == "SMA":
        return [f"chat_{k}_dataset" for k in SMA_FUNCTIONS]
    if category == "SR":
        return [variant_name(t, v) for t in PAIRED_TASKS for v in rm.VARIANTS]
    if category == "MA":
        return ["dataset_gsm8k"]
    raise ValueError(f"unknown category {category!r}; choose from {', '.join(CATEGORIES)}")


def classify(sub_dataset: str) -> tuple[str, str, str]:
    """(category, task, variant) of a published sub-dataset name; ValueError for an unknown one."""
    for category in CATEGORIES:
        if sub_dataset in sub_datasets(category):
            if category == "EC" and sub_dataset.endswith("_raw_dataset") and sub_dataset[:-12] in EC_TASKS:
                return category, sub_dataset[:-12], "raw"
            if category == "EC" and sub_dataset in EC_EXTRA:
                return category, _EXTRA_TASK[sub_dataset], "raw"
            if category == "SMA":
                return category, sub_dataset.removesuffix("_dataset"), "raw"
            if category == "SR":
                for task in PAIRED_TASKS:
                    for v in rm.VARIANTS:
                        if variant_name(task, v) == sub_dataset:
                            return category, task, v
            return category, sub_dataset, "raw"
    raise ValueError(f"unknown sub-dataset {sub_dataset!r}")


@dataclass(frozen=True)
class Problem:
    """An MA (GSM8K) problem of the study."""

    problem_id: str
    question: str
    answer: str


def remapped(inst: Instance, variant: str, mode: str, seed: int) -> Instance:
    rng = random.Random(f"{seed}:{inst.task}:{inst.index}:{variant}")
    item = f"{variant_name(inst.task, variant)}[{inst.index}]"
    r = rm.build(inst.texts(), inst.operator, variant, mode, rng, item)
    return replace(inst, category="SR", sub_dataset=variant_name(inst.task, variant), variant=variant,
                   examples=tuple((rm.apply(r, q), rm.apply(r, a)) for q, a in inst.examples),
                   question=rm.apply(r, inst.question), answer=rm.apply(r, inst.answer), remap=r,
                   meta={"remap_mode": mode})


def generate(categories: Sequence[str] = CATEGORIES, *, seed: int = DEFAULT_SEED, remap_mode: str = "repo",
             sma_mode: str = "paper", ma_problems: Sequence[Problem] = (), per_sub_dataset: int | None = None,
             ) -> Iterator[Instance]:
    """Every instance of the chosen categories, sub-dataset by sub-dataset; ``per_sub_dataset`` keeps the
    first N instances of each (a cheap probe: the same N instance ids in every variant)."""
    if remap_mode not in rm.MODES:
        raise ValueError(f"unknown remap mode {remap_mode!r}; choose repo or clean")
    if sma_mode not in SMA_MODES:
        raise ValueError(f"unknown SMA mode {sma_mode!r}; choose paper or repo")
    for c in categories:
        if c not in CATEGORIES:
            raise ValueError(f"unknown category {c!r}; choose from {', '.join(CATEGORIES)}")
    cut = slice(None, per_sub_dataset)
    ec_cache: dict[str, list[Instance]] = {}

    def ec(task: str) -> list[Instance]:
        if task not in ec_cache:
            ec_cache[task] = _ec_raw(task)(seed)[cut]
        return ec_cache[task]

    for category in CATEGORIES:
        if category not in categories:
            continue
        if category == "BC":
            for name, op in BC_SUBS.items():
                yield from _bc(op, name)(seed)[cut]
        elif category == "EC":
            for task in PAIRED_TASKS:
                yield from ec(task)
            for name in EC_EXTRA:
                yield from _ec_extra(name)(seed)[cut]
        elif category == "NBR":
            for op in "+-*":
                for base in (3, 4, 5):
                    yield from _nbr(op, base)(seed)[cut]
            for base in (3, 4, 5):
                yield from _conversion(base)(seed)[cut]
        elif category == "MA":
            for i, p in enumerate(list(ma_problems)[cut]):
                yield Instance("MA", "dataset_gsm8k", "dataset_gsm8k", "raw", i, (), p.question, p.answer,
                               meta={"problem_id": p.problem_id})
        elif category == "SMA":
            for kind in SMA_FUNCTIONS:
                yield from _sma(kind, sma_mode)(seed)[cut]
        elif category == "SR":
            for task in PAIRED_TASKS:
                for variant in rm.VARIANTS:
                    for inst in ec(task):
                        yield remapped(inst, variant, remap_mode, seed)
