"""Builds ddpc_torch._C against the torch of the running environment.

libddpc's C sources (src/ of this repository, two folders up) are built by
the repository's Makefile into build/pip/libddpc.a and linked into the
module, so the wheel stands alone: it needs torch and the system's C
libraries, not an installed libddpc. Only the libraries the linked objects
use end up needed (--as-needed). Build from a checkout:
    pip install --no-build-isolation ./bridges/torch
    pip wheel --no-build-isolation --no-deps ./bridges/torch
"""
import os
import subprocess

from setuptools import setup

# torch 2.x loads every installed backend when imported (the torch.backends
# entry points); a build must not load the module it is replacing, which
# may be an older or a broken one (a failed install left it truncated)
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
# DDPC_LIBDDPC: a libddpc.a already built by the repository's Makefile with
# its default flags (make torch2 passes build/libddpc.a), used as it is
LIB = os.environ.get("DDPC_LIBDDPC") or os.path.join(ROOT, "build", "pip", "libddpc.a")
# DDPC_TORCH_BUILD_DIR: where setuptools builds and writes the egg-info
# (default: here). make gives each venv its own, so that the builds for
# two venvs at once (make -j2 torch2 torch-npu) do not overwrite each
# other's objects (a truncated _C.so: "file too short").
BUILD_DIR = os.environ.get("DDPC_TORCH_BUILD_DIR")
if BUILD_DIR:
    os.makedirs(BUILD_DIR, exist_ok=True)


def pkg_libs(*pkgs):
    """The -l flags pkg-config gives for pkgs, or nothing if it knows none."""
    try:
        out = subprocess.run(["pkg-config", "--libs", *pkgs], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [f[2:] for f in out.split() if f.startswith("-l")]


class Build(BuildExtension):
    """Builds libddpc.a with the repository's Makefile first."""

    def run(self):
        if not os.path.exists(os.path.join(ROOT, "src", "comm")):
            raise RuntimeError(f"ddpc_torch builds from a ddpc checkout: {ROOT}/src is missing")
        if not os.environ.get("DDPC_LIBDDPC"):
            subprocess.run(["make", "-C", ROOT, "-s", f"-j{os.cpu_count() or 1}", "BUILD=build/pip",
                            "build/pip/libddpc.a"], check=True)
        elif not os.path.exists(LIB):
            raise RuntimeError(f"DDPC_LIBDDPC={LIB} does not exist")
        super().run()


# libddpc.a holds the collectives only (no BLAS, no zlib: those are
# libddpc_train's)
libs = pkg_libs("libcjson")
libs += ["m", "pthread", "rt"]

setup(
    ext_modules=[
        CppExtension(
            "ddpc_torch._C",
            # the adapter's sources; the Makefile's TORCH_SRC takes the same files
            ["ProcessGroupDDPC.cpp", "collectives.cpp", "work.cpp", "convert.cpp"],
            include_dirs=[os.path.join(ROOT, "include"), HERE],
            extra_compile_args=["-O2", "-Wno-unused-parameter"],
            extra_objects=[LIB],
            depends=[LIB, "compat.h", "ProcessGroupDDPC.h", "work.h", "convert.h"],  # relinked when libddpc.a changes
            extra_link_args=["-Wl,--as-needed"],
            libraries=libs,
        )
    ],
    cmdclass={"build_ext": Build},
    options={"build": {"build_base": BUILD_DIR}, "egg_info": {"egg_base": BUILD_DIR}} if BUILD_DIR else {},
)
