#!/bin/sh
# The seed's program as written for Ascend (examples/ddp_mnist_npu.py)
# edited as a user would to run it on the CPU with backend $1 (gloo, ddpc):
# the device 'cpu', no set_device, DDP without device_ids. Prints the script.
set -e
sed -e "s/backend='hccl'/backend='$1'/" \
    -e "s/torch.npu.set_device(f'npu:{local_rank}')/pass/" \
    -e "s/torch.device(f'npu:{local_rank}')/torch.device('cpu')/" \
    -e "s/DDP(model, device_ids=\[local_rank\])/DDP(model)/" "$2"
