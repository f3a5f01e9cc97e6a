"""The README's second Python example (a model written with sgrad.nn and sgrad.optim) runs
as written and its loss falls, as the README says."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "..", "README.md")


def python_blocks():
    text = open(README).read()
    section = text[text.index("## Python\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_module_example_runs_and_learns(tmp_path):
    blocks = python_blocks()
    assert len(blocks) >= 2, "README's Python section lost its model example"
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    out = subprocess.run([sys.executable, "-c", blocks[1]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    losses = [float(line.split()[1]) for line in out.stdout.splitlines()]
    assert len(losses) == 4 and losses[-1] < losses[0] - 0.3, out.stdout
    assert (tmp_path / "two_tower.safetensors").exists()
