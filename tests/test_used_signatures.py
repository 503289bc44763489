"""The signatures a change will use, in its first prompt (context/used.py, issue 27 item 2):
on a real temporary repository read through the real firewall, the definitions the write file
uses (behind a package re-export) are shown with their parameters and line numbers, chosen
over outlines of files it does not use when the ceiling is tight, and listed in the manifest
with ``used_by:<file>``."""

from __future__ import annotations

from pathlib import Path

from anti_sprawl.context.assemble import AssembledPrompt, assemble_worker_prompt
from anti_sprawl.context.manifest import FileChoice, UsedSignature
from anti_sprawl.context.used import detail_lines, used_entries
from anti_sprawl.fs.firewall import Firewall
from anti_sprawl.outline.views import file_outline, render_outline
from anti_sprawl.plan.model import Plan, TaskNode


def functions(prefix: str, n: int) -> str:
    """``n`` functions with bodies: their outline costs far less than their text."""
    body = "".join(f"    found = [p for p in found if len(p) > {k}]\n" for k in range(6))
    return "".join(
        f'\n\ndef {prefix}_{i}(path: str, depth: int = {i}) -> list[str]:\n    """Op {i}."""\n'
        f"    found = [path] * depth\n{body}    return found\n"
        for i in range(n)
    )


MODELS = (
    '"""Orders and prices."""\n\nfrom dataclasses import dataclass\n\nRATE = 0.2\n\n\n'
    "@dataclass\nclass Order:\n    item: str\n    quantity: int = 1\n\n"
    "    def total(self, unit: float) -> float:\n        return unit * self.quantity\n\n\n"
    "def price(order: Order, rate: float = RATE) -> float:\n"
    '    """The price of an order."""\n    return order.total(10.0) * (1 + rate)\n'
    + functions("model_helper", 30)
)
SOURCES = {
    "pkg/__init__.py": "from .models import Order, price\n",
    "pkg/models.py": MODELS,
    "pkg/other.py": '"""Unrelated."""\n' + functions("unrelated", 120),
    "app.py": (
        "from pkg import Order, price\n\n\n"
        "def checkout(item: str) -> float:\n    return price(Order(item))\n"
    ),
}
READS = ["pkg/__init__.py", "pkg/models.py", "pkg/other.py"]


def repo(root: Path) -> Path:
    for rel, text in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def assemble(root: Path, context_budget: int | None = None) -> AssembledPrompt:
    node = TaskNode(task_id="n1", name="Checkout", goal="Apply a discount in checkout.",
                    read_scope=READS, write_scope=["app.py"], token_budget=40_000,
                    max_tool_calls=8)  # fmt: skip
    plan = Plan(plan_id="p", requirement="Discounts.", tasks=[node])
    with Firewall(root, node.read_scope, node.write_scope) as fw:
        return assemble_worker_prompt(
            plan=plan, node=node, upstream=(), firewall=fw, context_budget=context_budget
        )


def choice(p: AssembledPrompt, path: str) -> FileChoice:
    [c] = [c for c in p.choices if c.path == path]
    return c


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_signatures_are_chosen_over_outlines_under_a_tight_ceiling(tmp_path: Path) -> None:
    root = repo(tmp_path)
    roomy = assemble(root)
    tight = assemble(root, context_budget=roomy.essentials.tokens + 260)
    text = tight.first_user_message
    # price() and Order are defined in models.py, reached through pkg/__init__'s re-export:
    # shown with parameters, fields and line numbers although models.py's outline does not fit
    price_line = line_of(MODELS, "def price(")
    order_line = line_of(MODELS, "class Order")
    assert f"{price_line}: def price(order: Order, rate: float=RATE) -> float: ..." in text
    assert f"{order_line}: class Order:" in text
    assert f"{line_of(MODELS, 'item: str')}:     item: str" in text
    assert "model_helper_0" not in text  # the rest of models.py's outline is left out
    models = choice(tight, "pkg/models.py")
    assert (models.form, models.reason, models.outline) == ("outline", "used", None)
    assert models.signatures == [
        UsedSignature(name="Order", line=order_line, reason="used_by:app.py"),
        UsedSignature(name="price", line=price_line, reason="used_by:app.py"),
    ]
    # the unused module's outline is what gives way
    other = choice(tight, "pkg/other.py")
    assert (other.form, other.reason) == ("dropped", "over_budget")
    assert choice(roomy, "pkg/other.py").form == "outline"  # with room, it is outlined


def test_with_room_the_outline_grows_around_the_used_signatures(tmp_path: Path) -> None:
    p = assemble(repo(tmp_path))
    models = choice(p, "pkg/models.py")
    assert (models.form, models.outline, models.reason) == ("outline", "signatures", "used")
    assert [s.name for s in models.signatures] == ["Order", "price"]
    text = p.first_user_message
    assert "def price(order: Order, rate: float=RATE) -> float" in text
    assert "model_helper_0" in text  # every name of the module, now
    # the re-exporting __init__ is small: whole, with nothing of its own used
    init = choice(p, "pkg/__init__.py")
    assert (init.form, init.signatures) == ("whole", [])


def test_a_used_class_shows_its_properties_with_their_signatures() -> None:
    source = (
        "import functools\n\n\nclass URL:\n    scheme: str\n\n    @property\n"
        "    def port(self) -> int | None:\n        return None\n\n"
        "    @functools.cached_property\n    def host(self) -> str:\n        return ''\n\n"
        "    def join(self, other: str) -> 'URL':\n        return self\n"
    )
    entries = file_outline("pkg/urls.py", source)
    shown = detail_lines(entries, {("URL", 4): {"pkg/client.py"}})
    view = render_outline(used_entries(entries or [], shown), "names", 16, shown)
    assert "def port(self) -> int | None" in view
    assert "def host(self) -> str" in view
    assert "scheme: str" in view
    assert "join" not in view  # a method is behaviour, shown only when used
