"""Ascend's `npu` device and `hccl` backend, served by ddpc on CPUs.

Installed (pip install --no-build-isolation ./bridges/torch_npu), it loads
with `import torch` through torch's `torch.backends` entry point, as
torch_npu does (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off; then
`import ddpc_torch_npu`). It then:

  - renames torch's PrivateUse1 device to 'npu' and registers `torch.npu`
    (ddpc_torch_npu.npu): tensors on 'npu:N' live in host memory and run
    torch's CPU kernels (npu.cpp), so results are bit for bit the CPU's;
  - generates the `.npu()` / `.is_npu` methods of tensors, modules, storages;
  - registers torch.distributed's backend 'hccl' for 'npu' tensors: ddpc's
    (ddpc_torch), which moves the host memory itself.

Devices per process: DDPC_NPU_DEVICE_COUNT, else LOCAL_WORLD_SIZE (what
torchrun and ddpc-run set), else 1.
"""
import os

import torch
import torch.distributed as dist

# ddpc_torch's extension itself, not the package: where `import ddpc_torch`
# comes before torch, torch's autoload runs this module while ddpc_torch is
# still importing torch, before it has bound its own names
from ddpc_torch import _C as _ddpc_C

from . import _C, npu

__all__ = ["npu"]


def _check_torch():
    built = _C.built_torch_version().split("+")[0]
    running = torch.__version__.split("+")[0]
    if built.split(".")[:2] != running.split(".")[:2]:
        raise ImportError(
            f"ddpc_torch_npu was built against torch {built} but torch {running} is imported: "
            "rebuild it in this environment (pip install --no-build-isolation ./bridges/torch_npu)"
        )


def _device_count():
    for name in ("DDPC_NPU_DEVICE_COUNT", "LOCAL_WORLD_SIZE"):
        value = os.environ.get(name)
        if value:
            try:
                count = int(value)
            except ValueError:
                raise ValueError(f"{name}={value!r}: expected a number of npu devices") from None
            if count < 1:
                raise ValueError(f"{name}={value!r}: expected at least 1 npu device")
            return count
    return 1


def _create_hccl(store, rank, world_size, timeout):
    return _ddpc_C.create_process_group(store, rank, world_size, timeout)


def _register():
    if torch._C._get_privateuse1_backend_name() == "npu" and getattr(torch, "npu", None) is npu:
        return
    _C._setup(_device_count())
    torch.utils.rename_privateuse1_backend("npu")
    torch._register_device_module("npu", npu)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    _ddpc_C._serve_host_device("privateuseone")
    if "HCCL" not in dist.Backend._plugins:
        dist.Backend.register_backend("hccl", _create_hccl, devices=["npu"])


_check_torch()
_register()
