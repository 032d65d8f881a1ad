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
import os

import torch
import torch.distributed as dist


def _check_torch(built):
    """The module only works inside the torch it was compiled against."""
    built = built.split("+")[0]
    running = torch.__version__.split("+")[0]
    if built.split(".")[:2] != running.split(".")[:2]:
        raise ImportError(
            f"ddpc_torch in {os.path.dirname(os.path.abspath(__file__))} was built against torch "
            f"{built} but torch {running} is imported: use the ddpc_torch built for this torch "
            "(a PYTHONPATH set for another Python's build, such as make torch's build/python for "
            "Debian's torch 1.13, puts that one first), or rebuild it in this environment "
            "(pip install --no-build-isolation ./bridges/torch)"
        )


# make torch writes _built.py beside _C.so; loading a _C.so into another
# torch's libraries can abort the process, so that build is checked first
try:
    from ._built import torch_version as _built_torch_version
except ImportError:
    pass
else:
    _check_torch(_built_torch_version)

from ._C import ProcessGroupDDPC, _stop_completion_threads, built_torch_version, create_process_group  # noqa: E402

__all__ = ["ProcessGroupDDPC", "create_process_group"]


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


_check_torch(built_torch_version())
_register()
