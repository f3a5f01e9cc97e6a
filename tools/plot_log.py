#!/usr/bin/env python3
"""Draws a training curve from a `-log FILE` of sgrad-w2v (JSON lines): the loss per
example against the share of the words read, with the learning rate as a dashed line on
its own scale at the right. Writes an SVG with the standard library alone, so it runs
wherever python3 does (no matplotlib needed).

usage: tools/plot_log.py LOG.jsonl OUT.svg [TITLE]
"""
import json
import math
import sys

W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 64, 36, 48


def read_records(path):
    """The records that carry a loss (the last one, written at the end, may not)."""
    recs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_log: {path}:{n}: not JSON: {e}")
            if r.get("loss") is not None:
                recs.append(r)
    if len(recs) < 2:
        sys.exit(f"plot_log: {path}: fewer than two records with a loss")
    return recs


def nice_ticks(lo, hi, n=5):
    """About n round tick values covering [lo, hi]."""
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


def svg(recs, title):
    xs = [r["progress"] for r in recs]
    loss = [r["loss"] for r in recs]
    lr = [r["lr"] for r in recs]
    lo, hi = min(loss), max(loss)
    pad = (hi - lo) * 0.05 or 0.05
    lo, hi = lo - pad, hi + pad
    lr_hi = max(lr) or 1.0
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

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


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1])
    recs = read_records(argv[1])
    title = argv[3] if len(argv) == 4 else "sgrad-w2v training"
    title = title.replace("&", "&amp;").replace("<", "&lt;")
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(svg(recs, title))


if __name__ == "__main__":
    main(sys.argv)
