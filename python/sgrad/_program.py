"""Finding and running the sgrad programs (sgrad-w2v, sgrad-fasttext) that the high-level
classes drive: one search rule and one error rule for all of them."""
import os
import shutil
import subprocess

from ._lib import lib


def find_program(name, env):
    """The path of program `name`: $env, else next to the loaded libsgrad.so or in ../bin of
    its directory, else PATH; FileNotFoundError saying how to get it."""
    chosen = os.environ.get(env)
    if chosen:
        return chosen
    libpath = getattr(lib, "_name", "")
    if os.sep in libpath:
        d = os.path.dirname(os.path.realpath(libpath))
        for cand in (os.path.join(d, name), os.path.join(d, "..", "bin", name)):
            if os.access(cand, os.X_OK):
                return cand
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found: set {env}, build it (make), or put it "
                                "on PATH")
    return found


def run_program(cmd, stdin_text=None):
    """Runs cmd (a list; stdin_text: bytes fed to its stdin) and returns (stdout, stderr)
    as text; RuntimeError carrying the program's stderr when it exits non-zero."""
    run = subprocess.run(cmd, input=stdin_text, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    err = run.stderr.decode(errors="replace")
    if run.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (
            os.path.basename(cmd[0]), run.returncode, err.strip()))
    return run.stdout.decode("utf-8", errors="surrogateescape"), err
