"""`torch.npu` on CPUs: what torch_npu's device module offers that training
scripts call, with the meaning it has when npu:N is host memory.

Devices are names: npu:0..npu:n-1 share the host's memory and CPUs. Work is
done when a call returns, so streams and events are marks that are always
reached and synchronize() returns at once. Random numbers on npu tensors
come from the CPU's generator (the kernels are the CPU's), so seeding npu
seeds the CPU. Memory figures count npu tensors of this process.
"""
import contextlib

import torch

from . import _C

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device", "device",
    "synchronize", "get_device_name", "get_device_properties", "manual_seed", "manual_seed_all", "seed",
    "seed_all", "initial_seed", "get_rng_state", "set_rng_state", "memory_allocated",
    "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "memory_stats", "empty_cache", "mem_get_info", "Stream", "Event",
    "current_stream", "default_stream", "stream", "set_stream",
]


def _index(dev):
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "npu":
            raise ValueError(f"expected an npu device, got {dev}")
        return current_device() if dev.index is None else dev.index
    if dev is None:
        return current_device()
    return int(dev)


def is_available():
    return True


def is_initialized():
    return True


def init():
    pass


def _is_in_bad_fork():
    return False


def _lazy_init():
    pass


def device_count():
    """DDPC_NPU_DEVICE_COUNT, else LOCAL_WORLD_SIZE, else 1 (read at import)."""
    return _C._device_count()


def current_device():
    return _C._current_device()


def set_device(dev):
    """torch.npu.set_device(n), ('npu:n') or (torch.device('npu', n))."""
    _C._set_device(_index(dev))


class device:
    """Context manager that makes dev the current npu device."""

    def __init__(self, dev):
        self.idx = _index(dev)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        _C._set_device(self.prev)
        return False


def synchronize(dev=None):
    """Returns at once: npu work is done when its call returns."""


def get_device_name(dev=None):
    return "ddpc npu on CPU"


class _Properties:
    def __init__(self, idx):
        self.name = get_device_name(idx)
        self.index = idx
        self.total_memory = _meminfo()[1]

    def __repr__(self):
        return f"_NpuDeviceProperties(name='{self.name}', index={self.index}, total_memory={self.total_memory})"


def get_device_properties(dev=None):
    return _Properties(_index(dev))


# Random numbers: the CPU's generator serves npu tensors.
def manual_seed(seed):
    torch.random.default_generator.manual_seed(int(seed))


manual_seed_all = manual_seed


def seed():
    torch.random.default_generator.seed()


seed_all = seed


def initial_seed():
    return torch.random.default_generator.initial_seed()


def get_rng_state(dev="npu"):
    return torch.random.default_generator.get_state()


def set_rng_state(state, dev="npu"):
    torch.random.default_generator.set_state(state)


# Memory: npu tensors of this process, whatever their index.
def _meminfo():
    free = total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            if key == "MemAvailable":
                free = int(value.split()[0]) * 1024
            elif key == "MemTotal":
                total = int(value.split()[0]) * 1024
    return free, total


def memory_allocated(dev=None):
    return _C._memory()[0]


def max_memory_allocated(dev=None):
    return _C._memory()[1]


# nothing is cached: what is reserved is what is allocated
memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(dev=None):
    _C._reset_peak()


reset_max_memory_allocated = reset_peak_memory_stats


def memory_stats(dev=None):
    now, peak, allocs, frees = _C._memory()
    return {
        "allocated_bytes.all.current": now, "allocated_bytes.all.peak": peak,
        "reserved_bytes.all.current": now, "reserved_bytes.all.peak": peak,
        "allocation.all.allocated": allocs, "allocation.all.freed": frees,
        "allocation.all.current": allocs - frees,
    }


def empty_cache():
    """Nothing is cached: freed npu memory goes back to the host at once."""


def mem_get_info(dev=None):
    """(free, total): the host's MemAvailable and MemTotal."""
    return _meminfo()


# Streams and events: synchronous marks.
Stream = torch.Stream
Event = torch.Event


def current_stream(dev=None):
    return torch.Stream(device=torch.device("npu", _index(dev)))


default_stream = current_stream


def set_stream(s):
    pass


@contextlib.contextmanager
def stream(s=None):
    yield
