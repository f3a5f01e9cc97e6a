#!/usr/bin/env python3
"""Draws a training curve from a `-log FILE` of sgrad-w2v (JSON lines) with
python/sgrad/plot.py (loaded by path: it needs neither libsgrad.so nor matplotlib for an
SVG; an OUT ending in .png is drawn by matplotlib).

usage: tools/plot_log.py LOG.jsonl OUT.svg [TITLE]
"""
import importlib.util
import os
import sys


def load_plot():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "sgrad_plot", os.path.join(here, "..", "python", "sgrad", "plot.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1])
    try:
        load_plot().plot_training(argv[1], argv[2], *argv[3:])
    except (OSError, ValueError, ImportError) as e:
        sys.exit(f"plot_log: {argv[1]}: {e}")


if __name__ == "__main__":
    main(sys.argv)
