"""torch.distributed's `ddpc` backend: `import ddpc_torch`, then
`dist.init_process_group("ddpc", init_method=...)`.

Importing registers the backend once (a second import is harmless). The
process group is a C++ c10d::ProcessGroup over libddpc (bridges/torch); it
meets its peers through the c10d Store torch hands it and then moves data
over ddpc's own connections: shared memory on one host, TCP between hosts.
"""
import atexit

import torch.distributed as dist

from ._C import ProcessGroupDDPC, _stop_completion_threads, create_process_group

__all__ = ["ProcessGroupDDPC", "create_process_group"]


def _create(store, rank, world_size, timeout):
    return create_process_group(store, rank, world_size, timeout)


if "DDPC" not in dist.Backend._plugins:
    dist.Backend.register_backend("ddpc", _create)
    # before the interpreter finalizes: a completion thread that then took
    # the GIL would be ended mid-C++ and abort the process
    atexit.register(_stop_completion_threads)
