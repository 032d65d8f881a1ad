"""torch.distributed's `ddpc` backend: `dist.init_process_group("ddpc")`.

Importing registers the backend once (a second import is harmless). Under
torch >= 2.5 installed with pip, torch imports it by itself (the
`torch.backends` entry point, see pyproject.toml), so no import is needed;
under torch 1.13 (make torch), `import ddpc_torch` first.

The backend is a C++ c10d::Backend (torch 2.x) or c10d::ProcessGroup (torch
1.13) over libddpc (bridges/torch); it meets its peers through the c10d
Store torch hands it and then moves data over ddpc's own connections:
shared memory on one host, TCP between hosts. It serves CPU tensors
(registered for the 'cpu' device on torch 2.x, so
`init_process_group("cpu:ddpc,cuda:nccl")` works there too).
"""
import atexit

import torch
import torch.distributed as dist

from ._C import ProcessGroupDDPC, _stop_completion_threads, built_torch_version, create_process_group

__all__ = ["ProcessGroupDDPC", "create_process_group"]


def _check_torch():
    """The module only works inside the torch it was compiled against."""
    built = built_torch_version().split("+")[0]
    running = torch.__version__.split("+")[0]
    if built.split(".")[:2] != running.split(".")[:2]:
        raise ImportError(
            f"ddpc_torch was built against torch {built} but torch {running} is imported: "
            "rebuild it in this environment (pip install --no-build-isolation ./bridges/torch)"
        )


def _create(store, rank, world_size, timeout):
    return create_process_group(store, rank, world_size, timeout)


def _register():
    if "DDPC" in dist.Backend._plugins:
        return
    try:
        dist.Backend.register_backend("ddpc", _create, devices=["cpu"])
    except TypeError:  # torch 1.13: no devices
        dist.Backend.register_backend("ddpc", _create)
    # before the interpreter finalizes: a completion thread that then took
    # the GIL would be ended mid-C++ and abort the process
    atexit.register(_stop_completion_threads)


_check_torch()
_register()
