#!/usr/bin/python3
"""torchrun.py -- PyTorch's own launchers, unmodified, with one parser fixed.

    /usr/bin/python3 tests/py/torchrun.py [TORCHRUN ARGS...]            # torchrun
    /usr/bin/python3 tests/py/torchrun.py --launch [LAUNCH ARGS...]     # torch.distributed.launch

Debian 12's python3-torch (1.13) under Python 3.11 fails before starting a
worker: Std.from_str('0') returns None. Its to_std() looks the value up by
iterating the IntFlag Std, and since Python 3.11 iterating a flag enum yields
only its canonical one-bit members (OUT, ERR), never NONE (0) or ALL (3).
This replaces that one parser with a correct one (Std(int(v)) for a value,
{local_rank: Std} for a mapping, ValueError otherwise) and then hands argv to
the unmodified torch.distributed.run.main (or torch.distributed.launch.main).
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    def to_std(v):
        return api.Std(int(v))

    if re.fullmatch(api._VALUE_REGEX, vm):
        return to_std(vm)
    if re.fullmatch(api._MAPPING_REGEX, vm):
        return {int(i): to_std(v) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = staticmethod(_from_str)

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--launch"]:
        import torch.distributed.launch as launcher

        args = args[1:]
        sys.argv[0] = "torch.distributed.launch"
    else:
        import torch.distributed.run as launcher

        sys.argv[0] = "torchrun"
    sys.argv[1:] = args
    sys.exit(launcher.main(args))
