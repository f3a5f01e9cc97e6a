"""sgrad.kge trains in-process through libsgrad_models (sgrad_kge.h): the filtered
evaluator's metrics equal a brute-force numpy ranking written here from the spec's score
formulas over ``entity_vectors`` / ``relation_vectors`` (every model, both sides, ties as
the mean rank), predictions equal numpy's scores sorted, save/load keeps the model, the
in-process model is bitwise that of ``sgrad-kge train`` with the same flags (read back by
numpy from the program's export), the ctypes structs match the C layout, and errors name
the file, line or argument. The comparisons with the program skip where sgrad-kge is not
built."""
import ctypes
import gc
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import sgrad
from programs import program
from sgrad import _models as M

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

SMALL = dict(dim=16, epochs=30, batch=64, chunk=32, negs=24, threads=2, seed=3)




def write_tsv(path, triples):
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples))
    return str(path)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """40 people; `likes` random, `liked_by` its inverse (so a test triple's inverse is in
    train: learnable); test also names `lonely`, an entity of no other file (unseen), and
    extra.tsv a `stranger` no training file names (unknown)."""
    d = tmp_path_factory.mktemp("kge")
    r = np.random.default_rng(11)
    likes = set()
    while len(likes) < 160:
        h, t = r.choice(40, 2, replace=False)
        likes.add((f"p{h}", f"p{t}"))
    pairs = sorted(likes)
    r.shuffle(pairs)
    train = [(h, "likes", t) for h, t in pairs[:140]] + [(t, "liked_by", h) for h, t in pairs]
    valid = [(h, "likes", t) for h, t in pairs[140:150]]
    test = [(h, "likes", t) for h, t in pairs[150:]] + [("lonely", "likes", "p0")]
    files = {"train": write_tsv(d / "train.tsv", train), "valid": write_tsv(d / "valid.tsv", valid),
             "test": write_tsv(d / "test.tsv", test)}
    files["extra"] = write_tsv(d / "extra.tsv", test[:3] + [("stranger", "likes", "p1")])
    files["dir"] = d
    return files


def read_triples(path):
    return [tuple(line.rstrip("\n").split("\t")) for line in open(path)]


# ---------------------------------------------------------------- numpy scores (the spec)

def cmul(a, b):
    """Complex product of rows [re | im]."""
    K = a.shape[-1] // 2
    ar, ai, br, bi = a[..., :K], a[..., K:], b[..., :K], b[..., K:]
    return np.concatenate([ar * br - ai * bi, ar * bi + ai * br], axis=-1)


def conj(a):
    K = a.shape[-1] // 2
    return np.concatenate([a[..., :K], -a[..., K:]], axis=-1)


def query(model_name, x, rel, head_side):
    """Q_t(x, rel) (x the head) or Q_h(rel, x) (x the tail), float64."""
    if model_name.startswith("transe"):
        return x - rel if head_side else x + rel
    if model_name == "distmult":
        return x * rel
    if model_name == "complex":
        return cmul(x, conj(rel) if head_side else rel)
    rot = np.concatenate([np.cos(rel), np.sin(rel)])  # rotate: rel holds K phases
    return cmul(x, conj(rot) if head_side else rot)


def sim(model_name, q, E):
    """sim(q, e) for every row e of E."""
    if model_name == "transe_l1":
        return -np.abs(E - q).sum(axis=1)
    if model_name == "transe_l2":
        return -np.sqrt(((E - q) ** 2).sum(axis=1))
    if model_name == "rotate":
        K = E.shape[1] // 2
        d = E - q
        return -np.sqrt(d[:, :K] ** 2 + d[:, K:] ** 2).sum(axis=1)
    return E @ q


def side_scores(m, x, r, head_side):
    """Every entity's score as the tail of (x, r) or the head of (r, x), float64, and a
    bound on each one's float32 rounding in the engine: 2e-6 of its terms' magnitude,
    above the 16 float32 roundings (6e-8 each) of a dim-16 sum."""
    name, recip = m.options["model"], m.options["reciprocal"]
    E = m.entity_vectors.astype(np.float64)
    R = m.relation_vectors.astype(np.float64)
    if head_side and recip:
        r, head_side = r + len(m.relation_names), False
    q = query(name, E[x], R[r], head_side)
    if name in ("distmult", "complex"):
        mag = np.abs(E) @ (np.abs(q) + np.abs(E[x]) * np.abs(R[r]).max())
    else:
        mag = np.abs(E).sum(axis=1) + np.abs(E[x]).sum() + np.abs(R[r]).sum()
    return sim(name, q, E), 2e-6 * mag


def mean_rank(scored, truth, banned):
    """1 + #(better) + #(tied others) / 2, the entities in banned (not truth) left out. The
    scores here are float64 of the float32 tables, the engine's float32: they order the
    entities alike unless two differ by less than their rounding, and such a near-tie
    fails the test (the data or seed would need changing), so that ranks compare exactly."""
    s, tol = scored
    keep = np.ones(len(s), bool)
    keep[list(banned - {truth})] = False
    keep[truth] = False
    other = s[keep]
    close = np.abs(other - s[truth]) <= tol[keep] + tol[truth]
    assert not np.any(close & (other != s[truth])), "near-tie: change the data or seed"
    return 1 + np.sum(other > s[truth]) + 0.5 * np.sum(other == s[truth])


def brute_force(m, test, filters, train):
    """The filtered metrics of test computed here (the spec's rule), with the model's rows;
    unseen: triples naming a name of no triple of the training file."""
    ents = {n: i for i, n in enumerate(m.entity_names)}
    rels = {n: i for i, n in enumerate(m.relation_names)}
    trained = {name for triple in read_triples(train) for name in triple}
    known = set()
    for f in filters:
        for h, r, t in read_triples(f):
            if h in ents and t in ents and r in rels:
                known.add((ents[h], rels[r], ents[t]))
    ranks, unknown, unseen = [], 0, 0
    for h, r, t in read_triples(test):
        if h not in ents or t not in ents or r not in rels:
            unknown += 1
            continue
        unseen += not {h, r, t} <= trained
        h, r, t = ents[h], rels[r], ents[t]
        ranks.append(mean_rank(side_scores(m, h, r, False), t,
                               {e for (a, b, e) in known if a == h and b == r}))
        ranks.append(mean_rank(side_scores(m, t, r, True), h,
                               {e for (e, b, c) in known if c == t and b == r}))
    ranks = np.array(ranks, np.float64)
    return {"mrr": np.mean(1 / ranks), "hits@1": np.mean(ranks <= 1),
            "hits@3": np.mean(ranks <= 3), "hits@10": np.mean(ranks <= 10),
            "mr": np.mean(ranks), "count": len(ranks) // 2, "unseen": unseen, "unknown": unknown}


# ---------------------------------------------------------------- tests

def test_trains_a_learnable_graph(graph):
    model = sgrad.kge.train(graph["train"], graph["valid"], graph["test"], eval_every=10, **SMALL)
    assert isinstance(model, sgrad.kge.KGEModel)
    log = model.training_log
    assert [r["epoch"] for r in log] == list(range(1, 31))
    assert [r["valid_mrr"] is not None for r in log] == [e % 10 == 0 for e in range(1, 31)]
    assert log[-1]["loss"] < log[0]["loss"]
    met = model.evaluate(graph["test"], filter=[graph["train"], graph["valid"], graph["test"]])
    assert set(met) == {"mrr", "hits@1", "hits@3", "hits@10", "mr", "count", "unseen", "unknown"}
    assert met["count"] == 11 and met["unseen"] == 1 and met["unknown"] == 0
    assert met["mrr"] > 0.3  # random ranking of 41 entities: about 0.1
    assert met == model.test_metrics  # train's own test ranking: train, valid, test filtered
    assert model.result["train_edges"] == 300 and model.result["entities"] == 41
    assert model.result["valid_mrr"] == log[-1]["valid_mrr"]


@pytest.mark.parametrize("name,reciprocal", [(n, None) for n in sgrad.kge.MODELS]
                         + [("complex", 0), ("distmult", 0), ("transe_l1", 1)])
def test_filtered_ranking_is_the_brute_force_one(graph, name, reciprocal):
    opts = dict(SMALL, epochs=8, reciprocal=reciprocal, seed=5)  # a seed without near-ties
    model = sgrad.kge.train(graph["train"], graph["valid"], graph["test"], model=name, **opts)
    filters = [graph["train"], graph["valid"], graph["test"]]
    for test, fs in ((graph["test"], filters), (graph["extra"], filters), (graph["test"], [])):
        got, want = model.evaluate(test, filter=fs), brute_force(model, test, fs, graph["train"])
        for key in ("mrr", "hits@1", "hits@3", "hits@10", "mr"):
            assert got[key] == pytest.approx(want[key], abs=1e-12), (name, test, key)
        for key in ("count", "unseen", "unknown"):
            assert got[key] == want[key], (name, test, key)
    assert model.evaluate(graph["extra"])["unknown"] == 1


@pytest.mark.parametrize("name", ["complex", "transe_l1", "rotate"])
def test_predictions_are_numpy_scores_sorted(graph, name):
    model = sgrad.kge.train(graph["train"], model=name, **dict(SMALL, epochs=5))
    names = model.entity_names
    for side, (a, b) in (("tails", ("p3", "likes")), ("heads", ("likes", "p3"))):
        if side == "tails":
            got = model.predict_tails(a, b, k=7)
            s, _ = side_scores(model, model.entity_index(a), model.relation_index(b), False)
        else:
            got = model.predict_heads(a, b, k=7)
            s, _ = side_scores(model, model.entity_index(b), model.relation_index(a), True)
        order = np.argsort(-s, kind="stable")[:7]
        assert [n for n, _ in got] == [names[i] for i in order]
        np.testing.assert_allclose([v for _, v in got], s[order], rtol=1e-5, atol=1e-5)
    assert len(model.predict_tails("p3", "likes", k=1000)) == len(names)


def test_vectors_are_a_read_only_view_that_keeps_the_model(graph):
    model = sgrad.kge.train(graph["train"], **dict(SMALL, epochs=2))
    ev, rv = model.entity_vectors, model.relation_vectors
    assert ev.dtype == np.float32 and ev.shape == (len(model.entity_names), 16)
    assert rv.shape == (2 * len(model.relation_names), 16)  # complex: reciprocal rows
    assert not ev.flags.writeable
    with pytest.raises(ValueError):
        ev[0, 0] = 1.0
    copy = ev.copy()
    del model
    gc.collect()
    np.testing.assert_array_equal(ev, copy)  # the array holds the model


def test_save_load_export(graph, tmp_path):
    model = sgrad.kge.train(graph["train"], graph["valid"], model="transe_l2", **SMALL)
    path = tmp_path / "m.kge"
    model.save(path)
    back = sgrad.kge.load(path)
    np.testing.assert_array_equal(back.entity_vectors, model.entity_vectors)
    np.testing.assert_array_equal(back.relation_vectors, model.relation_vectors)
    assert back.entity_names == model.entity_names
    assert back.relation_names == model.relation_names
    assert back.options["model"] == "transe_l2" and back.options["dim"] == 16
    fs = (graph["train"], graph["valid"])
    assert back.evaluate(graph["test"], filter=fs) == model.evaluate(graph["test"], filter=fs)
    assert back.predict_heads("likes", "p5", 4) == model.predict_heads("likes", "p5", 4)
    out = tmp_path / "exp"
    out.mkdir()
    back.export(out)
    np.testing.assert_array_equal(np.load(out / "entities.npy"), model.entity_vectors)
    assert (out / "entity_names.txt").read_text().split("\n")[:-1] == model.entity_names


def test_in_process_is_bitwise_the_program(graph, tmp_path):
    exe = program("sgrad-kge", "SGRAD_KGE")
    flags = dict(model="distmult", dim=12, epochs=6, batch=40, chunk=20, negs=16, lr=0.2,
                 seed=9, reg_coef=0.01, optim="rowwise-adagrad")
    argv = [exe, "train", "-train", graph["train"], "-valid", graph["valid"], "-test",
            graph["test"], "-output", str(tmp_path / "p.kge"), "-threads", "1",
            "-progress", "0"]
    for k, v in flags.items():
        argv += ["-" + k.replace("_", "-"), str(v)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    model = sgrad.kge.train(graph["train"], graph["valid"], graph["test"], threads=2, **flags)
    exp = tmp_path / "exp"
    exp.mkdir()
    subprocess.run([exe, "export", str(tmp_path / "p.kge"), "-output", str(exp)], check=True)
    assert np.load(exp / "entities.npy").tobytes() == model.entity_vectors.tobytes()
    assert np.load(exp / "relations.npy").tobytes() == model.relation_vectors.tobytes()
    printed = json.loads(out.stdout.strip().splitlines()[-1])
    for key, v in model.test_metrics.items():  # printed to 6 decimals, mr to 4
        assert printed[key] == pytest.approx(v, abs=1e-4 if key == "mr" else 1e-6), key


def test_callbacks_and_ctrl_c(graph):
    seen = []

    class Logger:
        def on_train_begin(self, m):
            seen.append("begin")

        def on_epoch_end(self, m):
            seen.append(m.training_log[-1]["epoch"])

        def on_train_end(self, m):
            seen.append("end")
    sgrad.kge.train(graph["train"], callbacks=[Logger()], **dict(SMALL, epochs=3))
    assert seen == ["begin", 1, 2, 3, "end"]

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            sgrad.kge.train(graph["train"], **dict(SMALL, epochs=1000000))
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 30
    model = info.value.model  # the model of the last step
    assert model.predict_tails("p1", "likes", 2)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_errors_name_the_file_line_or_argument(graph, tmp_path):
    missing = str(tmp_path / "nope.tsv")
    with pytest.raises(FileNotFoundError) as info:
        sgrad.kge.train(missing)
    assert info.value.filename == missing
    bad = write_tsv(tmp_path / "bad.tsv", [("a", "r", "b"), ("b", "r", "c")])
    with open(bad, "a") as f:
        f.write("c\tr\n")
    with pytest.raises(sgrad.FormatError, match=r"bad\.tsv:3"):
        sgrad.kge.train(bad, **dict(SMALL, epochs=1))
    for kwargs, name in ((dict(model="complx"), "model"), (dict(dim=15), "dim"),
                         (dict(negs=-1), "negs"), (dict(loss="hinge"), "loss"),
                         (dict(lr=0.0), "lr"), (dict(save_every=5), "save_every"),
                         (dict(eval_every=1), "eval_every"), (dict(chunk_negs=2), "chunk_negs")):
        with pytest.raises(ValueError, match=name):
            sgrad.kge.train(graph["train"], **kwargs)
    with pytest.raises(TypeError, match="epochs"):
        sgrad.kge.train(graph["train"], epochs=2.5)
    model = sgrad.kge.train(graph["train"], **dict(SMALL, epochs=1))
    with pytest.raises(FileNotFoundError):
        model.evaluate(missing)
    with pytest.raises(sgrad.FormatError, match=r"bad\.tsv:3"):
        model.evaluate(bad)
    with pytest.raises(KeyError, match="nobody"):
        model.predict_tails("nobody", "likes")
    with pytest.raises(KeyError):
        model.entity_index("nobody")
    with pytest.raises(ValueError, match="k"):
        model.predict_heads("likes", "p1", k=0)
    with pytest.raises(FileNotFoundError):
        sgrad.kge.load(missing)
    with pytest.raises(sgrad.FormatError, match="train.tsv"):
        sgrad.kge.load(graph["train"])


def test_threads_0_and_an_unrankable_test_file(graph, tmp_path):
    model = sgrad.kge.train(graph["train"], **dict(SMALL, epochs=1, threads=0))
    path = tmp_path / "m.kge"
    model.save(path)
    back = sgrad.kge.load(path, threads=0)
    unknown = write_tsv(tmp_path / "unknown.tsv", [("nobody", "likes", "none")])
    met = back.evaluate(unknown)
    assert met["count"] == 0 and met["unknown"] == 1, met
    assert all(met[k] is None for k in ("mrr", "hits@1", "hits@3", "hits@10", "mr")), met


def test_ctypes_structs_match_the_c_layout(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    structs = {"sg_event": M.Event, "sg_kge_opts": M.KGEOpts, "sg_kge_result": M.KGEResult,
               "sg_kge_metrics": M.KGEMetrics}
    lines = []
    for cname, py in structs.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for field, _ in py._fields_:
            lines.append(f'printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "sgrad_kge.h"\n'
                   "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(src), "-o",
                    str(exe)], check=True)
    got = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True,
                                                       text=True, check=True).stdout.splitlines())
    for cname, py in structs.items():
        assert int(got[cname]) == ctypes.sizeof(py), cname
        for field, _ in py._fields_:
            assert int(got[f"{cname}.{field}"]) == getattr(py, field).offset, (cname, field)
