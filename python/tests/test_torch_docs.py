"""docs/torch.md's example ("Use sgrad's tables in your PyTorch model") runs as written and
does what the page says: the rows it looked up moved in backward(), the others did not."""
import os
import re

import pytest

torch = pytest.importorskip("torch", reason="sgrad.torch needs PyTorch (not installed)")

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "torch.md")
HEADING = "## Use sgrad's tables in your PyTorch model"


def example() -> str:
    text = open(DOC, encoding="utf-8").read()
    assert HEADING in text, f"{DOC} lost its heading {HEADING!r}"
    section = text.split(HEADING, 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block under the heading"
    return m.group(1)


def test_example_is_short():
    lines = [ln for ln in example().splitlines() if ln.strip()]
    assert len(lines) <= 12, f"the README example grew to {len(lines)} lines"


def test_example_runs_and_updates_the_rows_it_touched():
    torch.manual_seed(0)
    ns: dict = {}
    exec(compile(example(), "docs/torch.md", "exec"), ns)
    tables = ns["tables"]
    # run it again on the same model: the rows named move, the others stay
    w0 = tables.embedding_bags["t0"].weight.detach().clone()
    w1 = tables.embedding_bags["t1"].weight.detach().clone()
    out = tables(ns["values"], lengths=ns["lengths"])
    assert out.shape == (2, 32) and out.requires_grad
    out.sum().backward()
    d0 = (tables.embedding_bags["t0"].weight.detach() - w0).abs().sum(1)
    d1 = (tables.embedding_bags["t1"].weight.detach() - w1).abs().sum(1)
    assert set(torch.nonzero(d0).flatten().tolist()) == {7, 99_999, 42}
    assert set(torch.nonzero(d1).flatten().tolist()) == {3, 4_999, 0}
    assert tables.embedding_bags["t0"].weight.grad is None
    assert ns["head"].weight.grad is not None
    assert tables.optimizer.steps == 2
