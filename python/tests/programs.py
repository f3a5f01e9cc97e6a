"""The project's programs for the tests that compare the package with them."""
import os
import shutil

import pytest

import sgrad


def program(name, env):
    """The program `name` beside the loaded libsgrad.so (a build tree), $env, or PATH;
    skips the test when none is built."""
    if os.environ.get(env):
        return os.environ[env]
    cand = os.path.join(os.path.dirname(os.path.abspath(sgrad._lib.path)), name)
    if os.access(cand, os.X_OK):
        return cand
    found = shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not built (SGRAD_BUILD_TOOLS=OFF) and not on PATH")
    return found
