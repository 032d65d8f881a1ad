"""Builds ddpc_torch_npu._C (npu.cpp) against the torch of the running
environment. It needs ddpc_torch installed first (the 'hccl' backend is
ddpc_torch's); it links no libddpc of its own:
    pip install --no-build-isolation ./bridges/torch
    pip install --no-build-isolation ./bridges/torch_npu
"""
from setuptools import setup
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
