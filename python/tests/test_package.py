"""The package as a whole: every public name documented and annotated, one exception per
failure kind across modules, and the warning for a tape that is never reset."""
import inspect
import warnings

import numpy as np
import pytest

import sgrad

MODULES = [sgrad, sgrad.errors, sgrad.context, sgrad.tensor, sgrad.ops, sgrad.autograd,
           sgrad.nn, sgrad.nn.functional, sgrad.nn.init, sgrad.optim, sgrad.dlpack,
           sgrad.word2vec, sgrad.fasttext]
try:  # sgrad.torch is checked where torch is installed
    import sgrad.torch
    MODULES.append(sgrad.torch)
except ImportError:
    pass


def public_names():
    for mod in MODULES:
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                continue
            yield f"{mod.__name__}.{name}", obj
            if inspect.isclass(obj) and obj.__module__.startswith("sgrad"):
                for mname, m in vars(obj).items():
                    if not mname.startswith("_") and (inspect.isfunction(m) or
                                                      isinstance(m, property)):
                        yield f"{mod.__name__}.{name}.{mname}", m


def test_every_public_name_has_a_docstring():
    missing = sorted({n for n, obj in public_names() if not (inspect.getdoc(obj) or "").strip()})
    assert not missing, f"{len(missing)} public names without a docstring: {missing}"


def test_every_public_function_is_annotated():
    bare = []
    for n, obj in public_names():
        fn = obj.fget if isinstance(obj, property) else obj
        if not inspect.isfunction(fn):
            continue
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__":
            bare.append(n)
    assert not bare, f"{len(bare)} public functions without a return annotation: {sorted(set(bare))}"


def test_a_missing_file_is_file_not_found_everywhere(tmp_path):
    missing = str(tmp_path / "absent")
    W = sgrad.from_numpy(np.zeros((3, 2)))
    calls = [lambda: sgrad.load_checkpoint(missing, {"W": W}),
             lambda: sgrad.read_checkpoint_meta(missing),
             lambda: sgrad.KeyedVectors.load_word2vec_format(missing),
             lambda: sgrad.fasttext.load_model(missing)]
    for call in calls:
        with pytest.raises(FileNotFoundError, match="absent"):
            call()


def test_a_damaged_file_is_format_error_everywhere(tmp_path):
    bad = tmp_path / "damaged"
    bad.write_bytes(b"garbage\x00\x01 not a file of any format")
    W = sgrad.from_numpy(np.zeros((3, 2)))
    calls = [lambda: sgrad.load_checkpoint(str(bad), {"W": W}),
             lambda: sgrad.read_checkpoint_meta(str(bad)),
             lambda: sgrad.KeyedVectors.load_word2vec_format(str(bad)),
             lambda: sgrad.fasttext.load_model(str(bad))]
    for call in calls:
        with pytest.raises(sgrad.FormatError):
            call()


def test_a_tape_never_reset_warns_once():
    ctx = sgrad.Context()
    ctx.TAPE_WARN_NODES = 50  # the default is a million nodes
    x = ctx.tensor(np.ones(4), requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(40):  # two nodes a backward: the tape passes 50 once
            (x * 2.0).sum().backward()
    assert len([w for w in caught if issubclass(w.category, ResourceWarning)]) == 1
    assert "tape_reset" in str(caught[0].message)
    np.testing.assert_array_equal(x.grad, np.full(4, 80.0))  # 40 backwards accumulated
