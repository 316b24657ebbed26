"""`transformer_engine.pytorch.optimizers` of the tier's TE shim.

megatron-core imports FusedAdam/FusedSGD from here (optimizer/__init__.py, distrib_optimizer.py) and
`OptimizerConfig.__post_init__` reads `inspect.signature(FusedAdam).parameters` to decide whether
the precision-aware optimizer is supported (it asserts master_weight_dtype, exp_avg_dtype,
exp_avg_sq_dtype and use_decoupled_grad are parameters). The constructors below copy TE 2.17's
signatures (transformer_engine/pytorch/optimizers/fused_adam.py, fused_sgd.py, read on GitHub) and raise when
called: the tier builds configs, never optimizers.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, Optional

import torch
from torch.optim.optimizer import required

from transformer_engine import ShimModule, _raise


class FusedAdam(torch.optim.Optimizer):
    """TE FusedAdam's signature (TE 2.17); instantiating it raises ShimUsed."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter | dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        bias_correction: bool = True,
        adam_w_mode: bool = True,
        capturable: bool = False,
        master_weights: bool = False,
        master_weight_dtype: torch.dtype = torch.float32,
        exp_avg_dtype: torch.dtype = torch.float32,
        exp_avg_sq_dtype: torch.dtype = torch.float32,
        use_decoupled_grad: bool = False,
        store_param_remainders: bool = False,
        set_grad_none: Optional[bool] = None,
    ) -> None:
        _raise("transformer_engine.pytorch.optimizers.FusedAdam()")


class FusedSGD(torch.optim.Optimizer):
    """TE FusedSGD's signature (TE 2.17); instantiating it raises ShimUsed."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter | dict],
        lr: Any = required,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        wd_after_momentum: bool = False,
        materialize_master_grads: bool = True,
        set_grad_none: Optional[bool] = None,
    ) -> None:
        _raise("transformer_engine.pytorch.optimizers.FusedSGD()")


def multi_tensor_applier(*args: Any, **kwargs: Any) -> Any:
    """TE's multi-tensor launcher (imported by megatron-core's clip_grads); calling it raises."""
    return _raise("transformer_engine.pytorch.optimizers.multi_tensor_applier()")


sys.modules[__name__].__class__ = ShimModule
