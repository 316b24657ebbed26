"""Repairs of shipped recipes that Megatron Bridge 0.6.2 itself rejects (issue 15).

The conformance tier (tests/bridge) showed recipes that stop in the real validation as NVIDIA ships
them; the catalog flags each with an ERROR finding that predicts the real error
(catalog_sync/conformance.PREDICTS). Where one override removes the cause without changing what
trains, recommend writes it into the Plan as a change with its reason, and preflight then takes
the finding as repaired (a Plan without the repair is still refused: the job would fail at its
first validation).

- seq_length_mismatch / seq_length_from_hf: the model's sequence length differs from the
  dataset's (Kimi-K2 takes 131072 from its HF config, its recipe trains 4096; Nemotron Nano v2's
  model 131072, dataset 8192): both get the Plan's sequence length, the one its layout is for.
- in_batch_packing_mbs1: in-batch packing with micro-batch size 1 (Ministral 3 SFT/PEFT): packing
  is switched off (it needs 2 or more sequences per micro-batch to pack).
- fsdp_ckpt_format: a Megatron-FSDP recipe that saves in another format than fsdp_dtensor.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from mbridge_launch.plan.overrides import is_on

Overrides = Mapping[str, str]


def _seq(recipe: Any, seq_length: int) -> list[tuple[str, str]]:
    # both to the Plan's sequence length, the one its layout and memory estimate are for
    return [("model.seq_length", str(seq_length)), ("dataset.seq_length", str(seq_length))]


def _seq_repaired(recipe: Any, seq_length: int, overrides: Overrides) -> bool:
    model = overrides.get("model.seq_length") or str(getattr(recipe, "seq_length", None) or "")
    dataset = overrides.get("dataset.seq_length") or str(getattr(recipe, "dataset_seq_length", None) or "")
    return bool(model) and model == dataset


def _packing(recipe: Any, seq_length: int) -> list[tuple[str, str]]:
    return [("dataset.enable_in_batch_packing", "false")]


def _packing_repaired(recipe: Any, seq_length: int, overrides: Overrides) -> bool:
    value = overrides.get("dataset.enable_in_batch_packing")
    return value is not None and not is_on(value)


def _fsdp_format(recipe: Any, seq_length: int) -> list[tuple[str, str]]:
    return [("checkpoint.ckpt_format", "fsdp_dtensor")]


def _fsdp_repaired(recipe: Any, seq_length: int, overrides: Overrides) -> bool:
    return overrides.get("checkpoint.ckpt_format") == "fsdp_dtensor"


# finding code -> (the overrides that repair it, whether a Plan's overrides repair it)
REPAIRS: dict[str, tuple[Callable[[Any, int], list[tuple[str, str]]], Callable[[Any, int, Overrides], bool]]] = {
    "seq_length_mismatch": (_seq, _seq_repaired),
    "seq_length_from_hf": (_seq, _seq_repaired),
    "in_batch_packing_mbs1": (_packing, _packing_repaired),
    "fsdp_ckpt_format": (_fsdp_format, _fsdp_repaired),
}


def repairs_for(code: str, recipe: Any, seq_length: int) -> list[tuple[str, str]]:
    """The overrides that repair finding `code` of `recipe` (empty: no known repair)."""
    entry = REPAIRS.get(code)
    return entry[0](recipe, seq_length) if entry else []


def is_repaired(code: str, recipe: Any, seq_length: int, overrides: Overrides) -> bool:
    """Whether a Plan with these overrides (key -> value, the last of each) removes the cause."""
    entry = REPAIRS.get(code)
    return bool(entry and entry[1](recipe, seq_length, overrides))
