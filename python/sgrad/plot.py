"""Training curves: the loss per example against the share of the words read, with the
learning rate dashed on its own scale at the right, from the progress records of a
`-log FILE` (JSON lines: progress, lr, loss, ...; see docs/formats.md, "Training log").

The standard library alone draws the SVG, so this module imports nothing of the package's
ctypes part: tools/plot_log.py loads it by path and runs where libsgrad.so is not
loadable. A PNG is drawn by matplotlib, imported only when one is asked for."""
import json
import math
import os
from typing import Any, Dict, Iterable, List, Union

_Path = Union[str, bytes, "os.PathLike"]
_Records = Union[_Path, Iterable[Dict[str, Any]]]

W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 64, 36, 48


def read_records(path: _Path) -> List[Dict[str, Any]]:
    """The records of a JSON-lines log (a ``-log FILE`` of sgrad-w2v or sgrad-fasttext), in
    order, one dict a line (blank lines skipped); ValueError naming the line if one is not
    JSON, FileNotFoundError for a missing file."""
    recs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON: {e}") from None
    return recs


def _with_loss(records_or_path: _Records) -> List[Dict[str, Any]]:
    recs = (read_records(records_or_path) if isinstance(records_or_path, (str, bytes))
            or hasattr(records_or_path, "__fspath__") else list(records_or_path))
    recs = [r for r in recs if r.get("loss") is not None]  # the end record may have none
    if len(recs) < 2:
        raise ValueError("fewer than two records with a loss")
    return recs


def nice_ticks(lo: float, hi: float, n: int = 5) -> List[float]:
    """About ``n`` round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) within
    [lo, hi], ascending."""
    span = hi - lo or abs(hi) or 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    for step in (mag, 2 * mag, 2.5 * mag, 5 * mag, 10 * mag):
        if span / step <= n:
            break
    first = (lo // step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 12))
        t += step
    return ticks


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def svg(recs: List[Dict[str, Any]], title: str) -> str:
    """The SVG document, as text, for records that all carry ``progress``, ``loss`` and
    ``lr``: the loss against progress on the left axis, the learning rate dashed on the
    right one; polylines "loss" and "lr" hold one point per record."""
    xs = [r["progress"] for r in recs]
    loss = [r["loss"] for r in recs]
    lr = [r["lr"] for r in recs]
    lo, hi = min(loss), max(loss)
    pad = (hi - lo) * 0.05 or 0.05
    lo, hi = lo - pad, hi + pad
    lr_hi = max(lr) or 1.0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    title = _escape(title)

    def px(x):
        return LEFT + x * pw

    def py(y):
        return TOP + (hi - y) / (hi - lo) * ph

    def py_lr(y):
        return TOP + (1 - y / lr_hi) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for t in nice_ticks(lo, hi):
        y = py(t)
        out.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        x = px(t)
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 16}" text-anchor="middle">{int(t * 100)}%</text>')
    for t in (0, lr_hi / 2, lr_hi):
        out.append(f'<text x="{LEFT + pw + 6}" y="{py_lr(t) + 4:.1f}" fill="#c60">{t:.3g}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 10}" text-anchor="middle">words read (all epochs)</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {TOP + ph / 2})">loss per example</text>')
    out.append(f'<text x="{W - 10}" y="{TOP + ph / 2}" text-anchor="middle" fill="#c60" '
               f'transform="rotate(90 {W - 10} {TOP + ph / 2})">learning rate</text>')
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, loss))
    out.append(f'<polyline id="loss" fill="none" stroke="#036" stroke-width="1.5" points="{pts}"/>')
    pts = " ".join(f"{px(x):.1f},{py_lr(y):.1f}" for x, y in zip(xs, lr))
    out.append(f'<polyline id="lr" fill="none" stroke="#c60" stroke-dasharray="4 3" points="{pts}"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _png(recs: List[Dict[str, Any]], title: str, out_path: _Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plot_training: a .png needs matplotlib (apt-get install "
                          "python3-matplotlib); an .svg needs nothing") from None
    fig, ax = plt.subplots(figsize=(W / 100, H / 100), dpi=100)
    ax.plot([r["progress"] for r in recs], [r["loss"] for r in recs], color="#036")
    ax.set_xlabel("words read (share of all epochs)")
    ax.set_ylabel("loss per example")
    ax.set_title(title)
    ax2 = ax.twinx()
    ax2.plot([r["progress"] for r in recs], [r["lr"] for r in recs], color="#c60", ls="--")
    ax2.set_ylabel("learning rate", color="#c60")
    fig.tight_layout()
    fig.savefig(out_path, format="png")
    plt.close(fig)


def plot_training(records_or_path: _Records, out_path: _Path,
                  title: str = "sgrad-w2v training") -> None:
    """Draws the records that carry a loss (a list of dicts, as Word2Vec.training_log, or
    the path of a -log file) to out_path: a PNG through matplotlib when out_path ends in
    .png (ImportError without it), else an SVG (standard library only). ValueError for
    fewer than two records with a loss or a line that is not JSON."""
    recs = _with_loss(records_or_path)
    if str(out_path).lower().endswith(".png"):
        _png(recs, title, out_path)
        return
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(svg(recs, title))
