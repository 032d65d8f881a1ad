"""Builds ddpc_torch_npu._C (npu.cpp) against the torch of the running
environment. It needs ddpc_torch installed first (the 'hccl' backend is
ddpc_torch's); it links no libddpc of its own:
    pip install --no-build-isolation ./bridges/torch
    pip install --no-build-isolation ./bridges/torch_npu
"""
import os

from setuptools import setup

# torch 2.x loads every installed backend when imported (the torch.backends
# entry points); a build must not load the module it is replacing, which
# may be an older or a broken one (a failed install left it truncated)
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    ext_modules=[
        CppExtension(
            "ddpc_torch_npu._C",
            ["npu.cpp"],
            extra_compile_args=["-O2", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
