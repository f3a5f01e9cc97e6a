"""Installs the sgrad package: the ctypes package plus libsgrad.so, built here with CMake.

    pip install --no-index --no-build-isolation ./python

works offline with only Debian's python3-setuptools (python3-wheel optional), cmake and a C
compiler (and python3-numpy at run time). Without a pyproject.toml pip builds with the
setuptools already installed, so no package index is asked for a build backend;
--no-build-isolation keeps it that way where a newer pip would otherwise build in an
isolated environment (pip 23.0, Debian bookworm's, does not need it).

The build step (build_py) configures the source tree this directory sits in (setup.py's
parent, which pip >= 21.3 builds in place) in a CMake build directory under setuptools'
build_temp, builds the targets sgrad_shared and sgrad_models_shared only (Release, no
programs, no tests), and copies the real files behind the libsgrad.so and
libsgrad_models.so symlinks into the package as sgrad/libsgrad.so and
sgrad/libsgrad_models.so, where sgrad/_lib.py and sgrad/_models.py find them first (after
SGRAD_LIBRARY / SGRAD_MODELS_LIBRARY). libsgrad_models.so needs libsgrad.so.0, which the
package has loaded (by that soname) before it loads the trainers' library. So the
package cannot be built from an sdist or a copy of python/ alone: the C sources must be
next to it. The wheel holds a platform binary, so it is a platform wheel
(cpXY-cpXY-linux_ARCH), not py3-none-any.

Environment at build time:
  CMAKE_BUILD_PARALLEL_LEVEL  parallel compile jobs (default: os.cpu_count())
  SGRAD_CMAKE_ARGS            extra arguments to the CMake configure step, split as a shell
                              would (e.g. "-DSGRAD_NATIVE=ON" or "-DSGRAD_OPENMP=OFF")
  CMAKE, CC                   the cmake program and the C compiler, as CMake reads them

The version is the C library's (CMakeLists.txt). An editable install (pip install -e) has
no build step: it uses the repository's build/libsgrad.so, as `make python` builds it.
"""
import os
import re
import shlex
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.errors import ExecError as _BuildError
except ImportError:  # setuptools < 59
    from distutils.errors import DistutilsExecError as _BuildError

here = os.path.dirname(os.path.abspath(__file__))
source_dir = os.path.dirname(here)
try:
    with open(os.path.join(source_dir, "CMakeLists.txt")) as f:
        version = re.search(r"project\(sgrad VERSION ([0-9.]+)", f.read()).group(1)
except (OSError, AttributeError):
    version = "0+unknown"  # the build step below says what is missing


def _fail(msg):
    raise _BuildError("sgrad: " + msg)


def _find_compiler():
    cc = shlex.split(os.environ.get("CC", ""))
    if cc:
        return shutil.which(cc[0])
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


_LIBRARIES = ("libsgrad.so", "libsgrad_models.so")  # copied into the package


def _cmake_build(build_dir):
    """Configures and builds sgrad_shared and sgrad_models_shared in build_dir; returns the
    real files of libsgrad.so and libsgrad_models.so."""
    cml = os.path.join(source_dir, "CMakeLists.txt")
    if not os.path.isfile(cml) or not all(os.path.isdir(os.path.join(source_dir, d))
                                          for d in ("src", "models")):
        _fail(f"the C sources are not next to this package ({cml}, src/ or models/ is "
              "missing): "
              "install from a checkout of the sgrad repository, `pip install ./python` "
              "run at its root (an sdist or a copy of python/ alone cannot be built)")
    cmake = os.environ.get("CMAKE") or shutil.which("cmake")
    if not cmake or not shutil.which(cmake):
        _fail("cmake is needed to build libsgrad.so (Debian: apt-get install cmake)")
    if not _find_compiler():
        _fail("no C compiler found (cc, gcc or clang; or set CC) to build libsgrad.so "
              "(Debian: apt-get install gcc)")
    # A build directory configured from another source tree (a moved checkout) is remade.
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache) as f:
            m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", f.read(), re.M)
        if not m or os.path.realpath(m.group(1)) != os.path.realpath(source_dir):
            shutil.rmtree(build_dir)
    configure = [cmake, "-S", source_dir, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                 "-DSGRAD_BUILD_TOOLS=OFF", "-DSGRAD_BUILD_TESTS=OFF", "-DSGRAD_INSTALL=OFF",
                 "-DSGRAD_BUILD_MODELS=ON",
                 "-DSGRAD_MPI=OFF"]  # the package loads libsgrad only, never sgrad_dist
    configure += shlex.split(os.environ.get("SGRAD_CMAKE_ARGS", ""))
    build = [cmake, "--build", build_dir, "--target", "sgrad_shared", "sgrad_models_shared"]
    if not os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL"):  # else cmake reads it itself
        build += ["--parallel", str(os.cpu_count() or 1)]
    for cmd, what in ((configure, "configuring"), (build, "building")):
        print("sgrad: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        try:
            subprocess.run(cmd, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            _fail(f"{what} libsgrad.so with CMake failed ({e}); its output is above")
    real = []
    for name in _LIBRARIES:
        lib = os.path.join(build_dir, name)
        if not os.path.exists(lib):
            _fail(f"CMake built the shared libraries but {lib} is not there")
        real.append(os.path.realpath(lib))  # libX.so -> libX.so.0 -> libX.so.X.Y.Z
    return real


class BuildPyWithLibrary(build_py):
    """build_py, then libsgrad.so and libsgrad_models.so (built by CMake) copied into the
    built package."""

    def run(self):
        super().run()
        build_temp = self.get_finalized_command("build").build_temp
        real = _cmake_build(os.path.abspath(os.path.join(build_temp, "cmake")))
        dest = os.path.join(self.build_lib, "sgrad")
        self.mkpath(dest)
        # One real file each, not the symlink chain: wheels cannot hold symlinks.
        for src, name in zip(real, _LIBRARIES):
            self.copy_file(src, os.path.join(dest, name), preserve_mode=True)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, "sgrad", name) for name in _LIBRARIES]


class BinaryDistribution(Distribution):
    """The package holds a platform binary: a platform wheel, installed into platlib."""

    def has_ext_modules(self):
        return True


setup(
    name="sgrad",
    version=version,
    description="Python bindings (ctypes) of sgrad, reverse-mode autodiff with sparse gradients",
    packages=["sgrad", "sgrad.nn", "sgrad.optim"],
    package_data={"sgrad": ["py.typed"]},  # PEP 561: the package ships its type hints
    python_requires=">=3.8",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildPyWithLibrary},
    distclass=BinaryDistribution,
    zip_safe=False,
)
