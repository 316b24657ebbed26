"""A GPU of a chosen type, as torch.cuda reports it, for building recipes on a machine without one.

Why: Megatron Bridge asks the device during recipe building and validation, not only at run time.
`apply_flex_dispatcher_backend` (called by MoE recipes while they build) keeps the flex dispatcher
only when `torch.cuda.is_available()` and `torch.cuda.get_device_properties(0)` name a GPU that
the backend supports (DeepEP: compute capability 8.x/9.x or a name starting with "NVIDIA B200" /
"NVIDIA B300"; HybridEP: 8.x-10.x; NCCL EP: 9.x/10.x), and falls back to alltoall otherwise;
`ConfigContainer.validate()` then re-checks the same through `validate_flex_dispatcher_backend`.
On a CPU-only machine (a login node, the test tier) the first call sees no CUDA and keeps "flex"
unconditionally, and the second raises (no device 0): every MoE recipe would fail for a reason that
no real cluster has. `catalog verify --present-gpu` and the test tier (tests/bridge) use this.

`presented_gpu("gb200")` patches, for the duration of a `with` block, the few `torch.cuda`
functions those checks read: `is_available` (True), `device_count` (8), `get_device_properties`,
`get_device_capability` and `get_device_name`, answering with the GPU type of the recipe (the
`<hw>` of its name) or of the Plan. Nothing else of torch.cuda is patched: code that really needs
a device (allocations, streams, `current_device`) still fails, loudly.

The values: the marketing names and compute capabilities that the CUDA driver reports for these
parts (H100/H200 SXM 9.0, B200/GB200 10.0, B300/GB300 10.3), HBM sizes from catalog/hardware.yaml,
SM counts from NVIDIA's datasheets. Only `name` and `major` are read by Megatron Bridge 0.6.2's
checks; `minor`, `total_memory` and `multi_processor_count` are there so that a check that starts
reading them gets a plausible value instead of an AttributeError. Rubin (r100, vr200) has no
published driver name or SM count: its entry is an assumption (tests/bridge/not_verified.py).
Runs inside the Megatron Bridge Python (real_build.py), stdlib + torch only.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator
from unittest import mock

GIB = 1024**3


@dataclass(frozen=True)
class FakeDeviceProperties:
    """The fields of torch.cuda._CudaDeviceProperties that recipes and validation may read."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    gcnArchName: str = "NVIDIA CUDA"  # noqa: N815 - torch's own spelling
    is_integrated: int = 0
    is_multi_gpu_board: int = 0


# recipe hardware token -> (driver name, major, minor, HBM GiB, SMs)
GPU_TYPES: dict[str, tuple[str, int, int, int, int]] = {
    "h100": ("NVIDIA H100 80GB HBM3", 9, 0, 80, 132),
    "h200": ("NVIDIA H200", 9, 0, 141, 132),
    "b200": ("NVIDIA B200", 10, 0, 180, 148),
    "b300": ("NVIDIA B300 SXM6 AC", 10, 3, 288, 148),
    "gb200": ("NVIDIA GB200", 10, 0, 186, 152),
    "gb300": ("NVIDIA GB300", 10, 3, 288, 152),
    # assumptions: Rubin's driver strings and SM counts are not published
    "r100": ("NVIDIA R100", 11, 0, 288, 160),
    "vr200": ("NVIDIA VR200", 11, 0, 288, 160),
}


def properties(gpu_type: str) -> FakeDeviceProperties:
    try:
        name, major, minor, hbm_gib, sms = GPU_TYPES[gpu_type]
    except KeyError:
        raise ValueError(f"unknown GPU type {gpu_type!r}; known: {', '.join(GPU_TYPES)}") from None
    return FakeDeviceProperties(name, major, minor, hbm_gib * GIB, sms)


@contextlib.contextmanager
def presented_gpu(gpu_type: str, device_count: int = 8) -> Iterator[FakeDeviceProperties]:
    """Within the block, torch.cuda reports `device_count` GPUs of `gpu_type` (see module doc)."""
    import torch

    props = properties(gpu_type)

    def get_device_properties(device: Any = None) -> FakeDeviceProperties:
        return props

    with contextlib.ExitStack() as stack:
        for attr, value in (
            ("is_available", lambda: True),
            ("device_count", lambda: device_count),
            ("get_device_properties", get_device_properties),
            ("get_device_capability", lambda device=None: (props.major, props.minor)),
            ("get_device_name", lambda device=None: props.name),
        ):
            stack.enter_context(mock.patch.object(torch.cuda, attr, value))
        yield props
