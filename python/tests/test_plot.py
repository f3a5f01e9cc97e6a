"""Progress records from Python: Word2Vec.training_log holds the records of sgrad-w2v's -log (words
read rising to the corpus's tokens times the epochs, progress ending at 1), and
plot_training draws it: the SVG parses as XML with one point per record that has a loss,
the same from the records and from a log file; a PNG through matplotlib where installed;
tools/plot_log.py runs where libsgrad.so cannot be loaded."""
import json
import os
import subprocess
import sys
import xml.dom.minidom

import numpy as np
import pytest

import sgrad

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    r = np.random.default_rng(2)
    path = tmp_path_factory.mktemp("plot") / "corpus.txt"
    lines = [" ".join(f"t{r.integers(8)}w{w}" for w in r.integers(0, 6, 8)) for _ in range(3000)]
    path.write_text("\n".join(lines) + "\n")
    m = sgrad.Word2Vec(corpus_file=str(path), vector_size=8, window=3, min_count=1, epochs=3,
                       workers=1, seed=5)
    m.tokens = sum(len(line.split()) for line in lines)
    return m


def test_training_log_records(model):
    log = model.training_log
    with_loss = [r for r in log if r["loss"] is not None]
    assert len(with_loss) > 10
    words = [r["words"] for r in log]
    assert all(a <= b for a, b in zip(words, words[1:]))
    assert all(a["words"] < b["words"] for a, b in zip(with_loss, with_loss[1:]))
    assert all(r["total_words"] == 3 * model.tokens for r in log)
    assert words[-1] == 3 * model.tokens and log[-1]["progress"] == 1.0
    for r in log:
        assert r["progress"] == pytest.approx(r["words"] / r["total_words"], abs=1e-6)
    assert [r["epoch"] for r in log] == sorted(r["epoch"] for r in log) and log[-1]["epoch"] == 3
    assert all(np.isfinite(r["loss"]) and r["loss"] > 0 for r in with_loss)


def points(svg_path):
    doc = xml.dom.minidom.parse(str(svg_path))
    lines = {p.getAttribute("id"): p for p in doc.getElementsByTagName("polyline")}
    return {k: [tuple(map(float, p.split(","))) for p in v.getAttribute("points").split()]
            for k, v in lines.items()}


def test_svg_has_one_point_per_record(model, tmp_path):
    recs = [r for r in model.training_log if r["loss"] is not None]
    sgrad.plot_training(model.training_log, str(tmp_path / "a.svg"), title="x < y & z")
    pts = points(tmp_path / "a.svg")
    assert len(pts["loss"]) == len(recs) and len(pts["lr"]) == len(recs)
    assert all(a[0] < b[0] for a, b in zip(pts["loss"], pts["loss"][1:]))
    # a higher loss is drawn higher (smaller y), a higher lr too
    for key, line in (("loss", pts["loss"]), ("lr", pts["lr"])):
        for (r1, p1), (r2, p2) in zip(zip(recs, line), zip(recs[1:], line[1:])):
            assert (r1[key] - r2[key]) * (p2[1] - p1[1]) >= 0
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in model.training_log))
    sgrad.plot_training(str(log), str(tmp_path / "b.svg"), title="x < y & z")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_png_through_matplotlib(model, tmp_path):
    pytest.importorskip("matplotlib")
    sgrad.plot_training(model.training_log, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_records_raise(tmp_path):
    with pytest.raises(ValueError, match="fewer than two"):
        sgrad.plot_training([{"progress": 0, "lr": 1, "loss": None}], str(tmp_path / "d.svg"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"progress": 0, "lr": 1, "loss": 2}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        sgrad.plot_training(str(bad), str(tmp_path / "d.svg"))
    assert not (tmp_path / "d.svg").exists()


def test_plot_log_tool_needs_no_library(model, tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in model.training_log))
    env = dict(os.environ, SGRAD_LIBRARY=str(tmp_path / "no-such-lib.so"))
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "plot_log.py"), str(log),
                    str(tmp_path / "e.svg")], check=True, env=env)
    sgrad.plot_training(str(log), str(tmp_path / "f.svg"))
    assert (tmp_path / "e.svg").read_bytes() == (tmp_path / "f.svg").read_bytes()
    run = subprocess.run([sys.executable, os.path.join(REPO, "tools", "plot_log.py"),
                          str(tmp_path / "absent.jsonl"), str(tmp_path / "g.svg")],
                         env=env, stderr=subprocess.PIPE)
    assert run.returncode != 0 and b"plot_log:" in run.stderr
