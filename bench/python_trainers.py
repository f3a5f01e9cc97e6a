"""The trainers from Python, in-process (sgrad.Word2Vec, sgrad.fasttext), against their
programs and gensim: the four speed goals of issue 35. JSON lines on stdout: a config
line, one line per part and arm, then one ratio line per part.

    PYTHONPATH=python /usr/bin/python3 bench/python_trainers.py [--build build
        --corpus bench/data/w2v/brown.txt --ft-input bench/data/fasttext/brown-genre.train
        --rounds 5 --threads 2 --epochs 5 --sg 0 --ft-epochs 5 --calls 2000 --lines 0
        --parts corpus_file,sentences,predict,supervised]

The package loads BUILD's libsgrad.so and libsgrad_models.so (SGRAD_LIBRARY, unless set)
and the programs are BUILD's sgrad-w2v and sgrad-fasttext, so both arms run one build.

Parts (goal in brackets):
- corpus_file [python/cli <= 1.05]: ``Word2Vec(corpus_file=F, ...)`` then
  ``wv.save_word2vec_format(OUT, binary=True)`` in this process, against
  ``sgrad-w2v -train F -output OUT -binary 1`` with the equivalent flags (a subprocess):
  whole wall times, the program's start, the corpus's reading, the vocabulary, training
  and writing the vectors included (the Python arm's interpreter and import are not: they
  are paid once per process). Flags: -size 100 -window 5 -negative 5 -hs 0 -sample 1e-3
  -min-count 5 -alpha 0.025 -seed 1, -iter/-cbow/-threads from --epochs/--sg/--threads.
- sentences [sgrad/gensim >= 2]: ``Word2Vec(sentences=S, ...)`` with S the corpus's lines
  as lists of str (a list held in memory), sgrad's against gensim's with the same
  arguments and ``workers``; words/sec = epochs x the corpus's tokens / the constructor's
  wall time (vocabulary and training). Two more arms in the same rounds bound what any
  Python layer could reach: ``sgrad-w2v -train F`` with the same flags (cli) and with
  ``-replicas`` = threads (cli_replicas), whole processes, no Python.
- predict [>= 100x the 19.6 ms per text the issue measured with a process per call]:
  ``model.predict(text)`` of one text (the first line of the supervised input, its labels
  dropped) by a classifier trained here on that input; microseconds per call, each round
  timing --calls calls.
- supervised [python/cli <= 1.05]: ``sgrad.fasttext.train_supervised(input=F, ...)`` then
  ``save_model(OUT.bin)`` against ``sgrad-fasttext supervised -input F -output OUT`` with
  the equivalent flags (-dim 100 -lr 0.1 -wordNgrams 2 -bucket 2000000 -minCount 1
  -seed 1 -verbose 0, -epoch/-thread from --ft-epochs/--threads), whole wall times.

Method: each part runs its arms in turn, A B A B ..., for --rounds rounds after one
untimed warm-up round; each arm's line gives the median (and min/max) over the rounds,
and the ratio line the medians' ratio with the goal and whether it is met.

Data: --corpus (default bench/data/w2v/brown.txt: the Brown corpus as bench/w2v_compare.sh
uses it, fetched by bench/brown_corpus.sh when missing, which needs npm); --ft-input
(default bench/data/fasttext/brown-genre.train, made by bench/fasttext_compare.sh; when it
is missing, the corpus's lines labelled __label__0 .. __label__14 in turn are written beside
the outputs instead, and the config line says so). --lines N keeps the first N lines of
both (0: all), for a smoke run: `--rounds 1 --lines 2000 --epochs 1 --ft-epochs 1
--calls 100` takes seconds.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ISSUE_PREDICT_US = 19600.0  # one text through a process per call, as the issue measured

W2V_FLAGS = dict(vector_size=100, window=5, negative=5, hs=0, sample=1e-3, min_count=5,
                 alpha=0.025, seed=1)
FT_FLAGS = dict(dim=100, lr=0.1, wordNgrams=2, bucket=2000000, minCount=1, seed=1, verbose=0)


def w2v_cli_flags(args):
    f = W2V_FLAGS
    return ["-size", str(f["vector_size"]), "-window", str(f["window"]),
            "-negative", str(f["negative"]), "-hs", str(f["hs"]), "-sample", str(f["sample"]),
            "-min-count", str(f["min_count"]), "-alpha", str(f["alpha"]), "-seed", str(f["seed"]),
            "-iter", str(args.epochs), "-cbow", str(1 - args.sg), "-threads", str(args.threads),
            "-binary", "1"]


def ft_cli_flags(args):
    return [x for k, v in FT_FLAGS.items() for x in ("-" + k, str(v))] + \
        ["-epoch", str(args.ft_epochs), "-thread", str(args.threads)]


def clock(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleave(arms, rounds):
    """{arm: [seconds per round]}: the arms in turn each round, round 0 a warm-up."""
    times = {name: [] for name, _ in arms}
    for r in range(rounds + 1):
        for name, fn in arms:
            s = clock(fn)
            if r:
                times[name].append(s)
    return times


def summary(part, arm, secs, args, **extra):
    med = statistics.median(secs)
    d = {"bench": "python_trainers", "part": part, "arm": arm, "s": round(med, 4),
         "s_min": round(min(secs), 4), "s_max": round(max(secs), 4), "rounds": args.rounds}
    d.update(extra)
    return d


def ratio_line(part, what, value, goal, met):
    return {"bench": "python_trainers", "part": part, "ratio": what, "value": round(value, 4),
            "goal": goal, "met": bool(met)}


def part_corpus_file(args, data, out, emit):
    import sgrad
    corpus = data["corpus"]
    py_out, cli_out = os.path.join(out, "py.bin"), os.path.join(out, "cli.bin")
    cmd = [os.path.join(args.build, "sgrad-w2v"), "-train", corpus, "-output", cli_out] + \
        w2v_cli_flags(args)

    def python_arm():
        m = sgrad.Word2Vec(corpus_file=corpus, epochs=args.epochs, sg=args.sg,
                           workers=args.threads, **W2V_FLAGS)
        m.wv.save_word2vec_format(py_out, binary=True)

    def cli_arm():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = interleave([("python", python_arm), ("cli", cli_arm)], args.rounds)
    same = open(py_out, "rb").read() == open(cli_out, "rb").read()
    emit(summary("corpus_file", "python", times["python"], args, same_file=same,
                 call=f"Word2Vec(corpus_file=F, epochs={args.epochs}, sg={args.sg}, "
                      f"workers={args.threads}, **{W2V_FLAGS}) + save_word2vec_format"))
    emit(summary("corpus_file", "cli", times["cli"], args, command=" ".join(cmd)))
    r = statistics.median(times["python"]) / statistics.median(times["cli"])
    emit(ratio_line("corpus_file", "python_s / cli_s", r, "<= 1.05", r <= 1.05))


def part_sentences(args, data, out, emit):
    import sgrad
    from gensim.models import Word2Vec as GensimWord2Vec
    sentences = data["sentences"]
    words = args.epochs * sum(len(s) for s in sentences)
    kw = dict(epochs=args.epochs, sg=args.sg, workers=args.threads, **W2V_FLAGS)
    prog = [os.path.join(args.build, "sgrad-w2v"), "-train", data["corpus"], "-output",
            os.path.join(out, "bound.bin")] + w2v_cli_flags(args)
    bounds = {"cli": prog, "cli_replicas": prog + ["-replicas", str(args.threads)]}
    arms = [("sgrad", lambda: sgrad.Word2Vec(sentences=sentences, **kw)),
            ("gensim", lambda: GensimWord2Vec(sentences=sentences, **kw))]
    arms += [(name, lambda c=cmd: subprocess.run(c, check=True, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL))
             for name, cmd in bounds.items()]
    times = interleave(arms, args.rounds)
    rate = {}
    for arm, _ in arms:
        rate[arm] = words / statistics.median(times[arm])
        extra = dict(command=" ".join(bounds[arm])) if arm in bounds else \
            dict(call=f"Word2Vec(sentences=list of {len(sentences)}, **{kw})")
        emit(summary("sentences", arm, times[arm], args, words=words,
                     words_per_sec=round(rate[arm]), **extra))
    r = rate["sgrad"] / rate["gensim"]
    emit(ratio_line("sentences", "sgrad_words_per_sec / gensim_words_per_sec", r, ">= 2", r >= 2))
    # The bound: the same training from the file by the program, no Python at all (one
    # model, and -replicas: the fastest 2-core mode, whose vectors depend on the count).
    for arm in bounds:
        r = rate[arm] / rate["gensim"]
        emit(ratio_line("sentences", f"{arm}_words_per_sec / gensim_words_per_sec (bound)", r,
                        ">= 2", r >= 2))


def first_text(path):
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return " ".join(w for w in f.readline().split() if not w.startswith("__label__"))


def part_predict(args, data, out, emit):
    from sgrad import fasttext
    model = fasttext.train_supervised(input=data["ft_input"], epoch=args.ft_epochs,
                                      thread=args.threads, **FT_FLAGS)
    text = first_text(data["ft_input"])
    model.predict(text)
    per_call = []
    for _ in range(args.rounds + 1):
        s = clock(lambda: [model.predict(text) for _ in range(args.calls)])
        per_call.append(s / args.calls * 1e6)
    us = per_call[1:]
    med = statistics.median(us)
    emit({"bench": "python_trainers", "part": "predict", "arm": "sgrad", "us": round(med, 2),
          "us_min": round(min(us), 2), "us_max": round(max(us), 2), "calls": args.calls,
          "rounds": args.rounds, "text_words": len(text.split()),
          "labels": len(model.get_labels()), "call": "model.predict(text)"})
    r = ISSUE_PREDICT_US / med
    emit(ratio_line("predict", "19600 us / us per call", r, ">= 100", r >= 100))


def part_supervised(args, data, out, emit):
    from sgrad import fasttext
    py_out, cli_out = os.path.join(out, "py_ft.bin"), os.path.join(out, "cli_ft")
    cmd = [os.path.join(args.build, "sgrad-fasttext"), "supervised", "-input", data["ft_input"],
           "-output", cli_out] + ft_cli_flags(args)

    def python_arm():
        fasttext.train_supervised(input=data["ft_input"], epoch=args.ft_epochs,
                                  thread=args.threads, **FT_FLAGS).save_model(py_out)

    def cli_arm():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = interleave([("python", python_arm), ("cli", cli_arm)], args.rounds)
    same = open(py_out, "rb").read() == open(cli_out + ".bin", "rb").read()
    emit(summary("supervised", "python", times["python"], args, same_file=same,
                 call=f"train_supervised(input=F, epoch={args.ft_epochs}, "
                      f"thread={args.threads}, **{FT_FLAGS}) + save_model"))
    emit(summary("supervised", "cli", times["cli"], args, command=" ".join(cmd)))
    r = statistics.median(times["python"]) / statistics.median(times["cli"])
    emit(ratio_line("supervised", "python_s / cli_s", r, "<= 1.05", r <= 1.05))


PARTS = {"corpus_file": part_corpus_file, "sentences": part_sentences,
         "predict": part_predict, "supervised": part_supervised}


def head(src, dst, lines):
    with open(src, "rb") as f, open(dst, "wb") as g:
        for i, line in enumerate(f):
            if i == lines:
                break
            g.write(line)


def prepare(args, out):
    """The corpus and the supervised input (cut to --lines), and the sentences."""
    corpus = args.corpus
    if not os.path.exists(corpus) or os.path.getsize(corpus) == 0:
        default = os.path.join(REPO, "bench", "data", "w2v", "brown.txt")
        if os.path.abspath(corpus) != default:
            sys.exit(f"python_trainers: no corpus at {corpus}")
        subprocess.run(["bash", os.path.join(HERE, "brown_corpus.sh"), corpus], check=True)
    ft_input, ft_made = args.ft_input, False
    if not os.path.exists(ft_input):
        ft_input, ft_made = os.path.join(out, "labelled.txt"), True
        with open(corpus, "rb") as f, open(ft_input, "wb") as g:
            for i, line in enumerate(f):
                g.write(b"__label__%d %s" % (i % 15, line))
    if args.lines > 0:
        head(corpus, os.path.join(out, "corpus.txt"), args.lines)
        head(ft_input, os.path.join(out, "ft.txt"), args.lines)
        corpus, ft_input = os.path.join(out, "corpus.txt"), os.path.join(out, "ft.txt")
    with open(corpus, encoding="utf-8", errors="surrogateescape") as f:
        sentences = [line.split() for line in f]
    return {"corpus": corpus, "ft_input": ft_input, "ft_input_made": ft_made,
            "sentences": sentences}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--corpus", default=os.path.join(REPO, "bench", "data", "w2v", "brown.txt"))
    ap.add_argument("--ft-input", default=os.path.join(REPO, "bench", "data", "fasttext",
                                                       "brown-genre.train"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="workers / -threads / thread")
    ap.add_argument("--epochs", type=int, default=5, help="word2vec epochs")
    ap.add_argument("--sg", type=int, default=0, choices=(0, 1), help="1 skip-gram, 0 CBOW")
    ap.add_argument("--ft-epochs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000, help="predict calls per round")
    ap.add_argument("--lines", type=int, default=0, help="first N lines of the data (0: all)")
    ap.add_argument("--parts", default=",".join(PARTS))
    args = ap.parse_args(argv)
    args.build = os.path.abspath(args.build)
    parts = args.parts.split(",")
    for p in parts:
        if p not in PARTS:
            ap.error(f"--parts: no part {p!r} (of {', '.join(PARTS)})")
    os.environ.setdefault("SGRAD_LIBRARY", os.path.join(args.build, "libsgrad.so"))
    sys.path.insert(0, os.path.join(REPO, "python"))
    import sgrad
    from sgrad import _models

    def emit(d):
        print(json.dumps(d), flush=True)
    out = tempfile.mkdtemp(prefix="sgrad-python-trainers-")
    try:
        data = prepare(args, out)
        _models.models()
        gensim_version = None
        if "sentences" in parts:
            import gensim
            gensim_version = gensim.__version__
        emit({"bench": "python_trainers", "command": " ".join([sys.executable] + sys.argv),
              "config": vars(args), "corpus": data["corpus"], "ft_input": data["ft_input"],
              "ft_input_made_from_corpus": data["ft_input_made"],
              "corpus_lines": len(data["sentences"]),
              "corpus_tokens": sum(len(s) for s in data["sentences"]),
              "libsgrad": sgrad._lib.path, "libsgrad_models": _models.path,
              "gensim": gensim_version, "python": sys.version.split()[0],
              "machine": platform.machine(), "cpus": os.cpu_count(),
              "loadavg": os.getloadavg()})
        for p in parts:
            PARTS[p](args, data, out, emit)
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
