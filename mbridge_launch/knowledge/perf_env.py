"""The NVIDIA performance environment a Plan selects, as NVIDIA sets it for its performance runs.
Values, never secrets."""

from __future__ import annotations

from mbridge_launch.knowledge.vocabulary import BLACKWELL, NVL72, gpu_type_or_none


def perf_env(gpu_type: str, tp: int, cp: int) -> dict[str, str]:
    env = {
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "NCCL_NVLS_ENABLE": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "NVTE_FWD_LAYERNORM_SM_MARGIN": "20",
        "NVTE_BWD_LAYERNORM_SM_MARGIN": "20",
    }
    gpu = gpu_type_or_none(gpu_type) or gpu_type.lower()
    if gpu in BLACKWELL:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "32"
    elif tp > 1 or cp > 1:
        # Hopper: TP/CP communication must be scheduled in issue order to overlap with compute
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    if gpu in NVL72:
        env["NCCL_NET_GDR_LEVEL"] = "PHB"
        env["NCCL_NET_GDR_C2C"] = "1"
    return dict(sorted(env.items()))


def nvl72_segment(nodes: int, max_nodes_per_domain: int = 18) -> int:
    """NVIDIA's benchmark launcher rule: the node count up to 18, else the largest divisor of the
    node count that is at most 18, so that a job's nodes sit inside NVLink domains."""
    if nodes <= max_nodes_per_domain:
        return nodes
    return max(d for d in range(1, max_nodes_per_domain + 1) if nodes % d == 0)
