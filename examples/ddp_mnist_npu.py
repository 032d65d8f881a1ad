#!/usr/bin/env python3
"""The seed's program as written for Ascend (torch_npu, backend 'hccl'):
Linear(784, 10) on MNIST with DDP, one process per NPU. On a machine without
NPUs, ddpc_torch_npu (bridges/torch_npu) serves torch.npu and 'hccl' on CPUs:

    pip install --no-build-isolation ./bridges/torch ./bridges/torch_npu
    HCCL_IF_IP=127.0.0.1 torchrun --nproc_per_node=2 examples/ddp_mnist_npu.py

It reads ./data/MNIST/raw (torchvision downloads it there when it is not
there already) and writes rank 0's final parameters to ./mnist_ddp.pt.
Nothing in it knows about ddpc: on Ascend, `import torch_npu` would go where
the comment says (torch_npu >= 2.5 loads itself at `import torch` too).
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

# import torch_npu  # on Ascend with torch_npu < 2.5


def train(rank, local_rank, world_size):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group(backend='hccl', init_method='env://', rank=rank, world_size=world_size)
    torch.npu.set_device(f'npu:{local_rank}')
    device = torch.device(f'npu:{local_rank}')

    model = nn.Linear(784, 10).to(device)
    model = DDP(model, device_ids=[local_rank])

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    dataset = datasets.MNIST('./data', train=True, download=True, transform=transform)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    epochs = int(os.environ.get('EPOCHS', '1'))
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch, (data, target) in enumerate(loader):
            data = data.view(data.size(0), -1).to(device)
            target = target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            if batch % 100 == 0 and rank == 0:
                print(f'Epoch: {epoch} | Batch: {batch} | Loss: {loss.item():.4f}', flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), 'mnist_ddp.pt')
    dist.destroy_process_group()


if __name__ == '__main__':
    train(int(os.environ['RANK']), int(os.environ['LOCAL_RANK']), int(os.environ['WORLD_SIZE']))
