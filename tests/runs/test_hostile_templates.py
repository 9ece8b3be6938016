"""Issue 29, M2 and M3: user templates render with a hard cap on every value and on time by
construction (runs.sandbox: a child process with RLIMIT_AS, RLIMIT_CPU and a wall-clock deadline), not
by a list of filters. A corpus of hostile templates -- filters that build values nothing counts (join,
make_list, slice, center, indent, format, replace, wordwrap, truncate), nested {% with %}, |length,
str.format widths and string methods, concatenation in a loop, recursion, loops -- is refused by the caps
(the reason names which), and the calling process's memory does not grow. How long a refusal takes is
measured (docs/runs.md, "Bounded templates"), not asserted: a loaded machine would fail a timed assertion."""

from __future__ import annotations

import os
import resource

import pytest

from runs import chat_template, sandbox, templating
from runs.chat_template import ChatTemplateError, render_chat
from subjects import prompts

MB = 1024 * 1024
PROBLEM = "x" * 20_000  # joined with itself: 400 million characters, over the memory cap

DJANGO = {
    "make_list then join": "{{ problem|make_list|join:problem }}",
    "join a joined list": "{% with a=problem|make_list|join:problem %}{{ a|make_list|join:problem }}{% endwith %}",
    "nested with and length": ("{% with a=problem|make_list %}{% with b=a|join:problem %}{% with c=b|make_list %}"
                               "{{ c|length }}{% endwith %}{% endwith %}{% endwith %}"),
    "length of a joined list": "{{ problem|make_list|join:problem|length }}",
    "slice of a joined list": "{{ problem|make_list|join:problem|slice:':10' }}",
    "filter tag": "{% filter make_list|join:problem %}{{ problem }}{% endfilter %}",
    "exemplars joined": "{{ exemplars|join:problem|make_list|join:problem|length }}",
    "centered many times": "{% with a=problem|make_list|join:problem %}{{ a|center:9999|length }}{% endwith %}",
    "loops": "".join("{% for c" + str(i) + " in problem %}" for i in range(4)) + "x" + "{% endfor %}" * 4,
    "widthratio": "{% widthratio 1 1 99999999999999999999999999999 as w %}{{ problem|make_list|join:problem }}",
}

JINJA = {
    "center": "{{ 'x'|center(300000000) }}",
    "indent": "{{ ('x\\n' * 1000)|indent(1000000) }}",
    "format filter": "{{ '%300000000d'|format(1) }}",
    "replace": "{{ ('x' * 1000)|replace('x', 'y' * 999999) }}",
    "join": "{{ (['x' * 999999] * 999)|join }}",
    "wordwrap": "{{ ('x ' * 500)|wordwrap(1, wrapstring='y' * 999999) }}",
    "truncate": "{% set s = 'x' * 999999 %}{{ (s|truncate(999999, end=s) ~ s)|replace('x', s) }}",
    "str.format width": "{{ '{:>300000000}'.format(1) }}",
    "ljust method": "{{ 'x'.ljust(300000000) }}",
    "zfill method": "{{ '1'.zfill(300000000) }}",
    "expandtabs": "{{ ('\\t' * 1000).expandtabs(1000000) }}",
    "concatenation in a loop": ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                                "{% endfor %}{{ ns.s|length }}"),
    "lipsum": "{{ lipsum(n=100000000) }}",
    "range joined": "{{ range(99999)|join('x' * 99999) }}",
    "recursion": "{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(1) }}",
    "loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "slow filter": "{{ ('x' * 999999)|wordwrap(1) }}",
}


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.fixture(scope="module", autouse=True)
def warm():
    # Peak memory is measured from here: what importing and the first child cost is not the templates'.
    prompts.render("{{ problem }}", problem="warm")
    render_chat("{{ messages[0].content }}", [{"role": "user", "content": "warm"}])
    yield
    sandbox.shutdown()


@pytest.mark.parametrize("template", DJANGO.values(), ids=DJANGO.keys())
def test_a_hostile_prompt_template_is_refused_quickly_and_the_caller_stays_small(template):
    before = peak_rss()
    with pytest.raises(templating.PromptTemplateError) as refused:
        prompts.render(template, problem=PROBLEM, exemplars=[{"question": PROBLEM, "answer": PROBLEM}] * 100)
    assert peak_rss() - before < 32 * MB
    assert str(refused.value)  # with its reason


@pytest.mark.parametrize("template", JINJA.values(), ids=JINJA.keys())
def test_a_hostile_chat_template_is_refused_quickly_and_the_caller_stays_small(template):
    before = peak_rss()
    with pytest.raises(ChatTemplateError) as refused:
        render_chat(template, [{"role": "user", "content": "hi"}])
    assert peak_rss() - before < 32 * MB
    assert str(refused.value).startswith("the chat template")


def test_a_value_over_the_memory_cap_is_refused_as_such(settings):
    settings.TEMPLATE_MEMORY_MB = 64
    sandbox.shutdown()  # children take the cap they were started with
    try:
        with pytest.raises(ChatTemplateError, match="needs more than 64 MB of memory"):
            render_chat("{{ 'x'.ljust(300000000) }}", [])
        with pytest.raises(templating.PromptTemplateError, match="needs more than 64 MB of memory"):
            prompts.render("{{ problem|make_list|join:problem }}", problem=PROBLEM)
    finally:
        sandbox.shutdown()


def test_a_render_past_its_wall_clock_bound_is_killed(monkeypatch):
    # A filter that runs long in one call: no step is counted, the child is killed at the deadline.
    monkeypatch.setattr(chat_template, "MAX_SECONDS", 0.2)
    monkeypatch.setattr(sandbox, "GRACE_SECONDS", 0.3)
    with pytest.raises(ChatTemplateError, match="takes (longer|more) than 0.2 s"):  # the bound ended it
        render_chat("{{ ('x' * 999999)|wordwrap(1) }}", [])
    # The next render gets a fresh child.
    assert render_chat("{{ messages[0].content }}", [{"role": "user", "content": "hi"}]) == "hi"


def test_ordinary_templates_render_as_before_and_the_child_is_reused():
    assert prompts.render(prompts.K_SHOT_TEMPLATE, problem="2+2?",
                          exemplars=[{"question": "1+1?", "answer": "2"}]) == "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA:"
    idle = sandbox._IDLE[os.getpid()][:]
    assert prompts.render("{{ problem }}", problem="again") == "again"
    assert sandbox._IDLE[os.getpid()] == idle  # the same idle child took it, no new fork


@pytest.mark.parametrize("template", [
    "{% for a in b %}" * 30 + "{% endfor %}" * 30,  # Python: too many statically nested blocks
    "{% if a %}" * 200 + "{% endif %}" * 200,  # Python: too many levels of indentation
    "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",  # Jinja's parser: RecursionError
])
def test_a_chat_template_nested_too_deep_to_compile_is_the_templates_error_not_a_crash(template):
    with pytest.raises(ChatTemplateError, match="does not compile"):
        chat_template.compile_template(template)
    with pytest.raises(ChatTemplateError, match="does not compile"):
        render_chat(template, [])


def test_a_template_source_is_bounded_before_it_is_compiled():
    # Compiling runs where a template is saved (the web process): its cost grows with the source.
    with pytest.raises(ChatTemplateError, match="longer than 200,000 characters"):
        chat_template.compile_template("x" * 200_001)
    with pytest.raises(templating.PromptTemplateError, match="longer than 200,000 characters"):
        templating.compile_template("x" * 200_001)
    assert prompts.template_error("x" * 200_000) is None
