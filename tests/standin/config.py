"""run_recipe.py's command line -> a flat config {dotted.key: value}.

Precedence as in Megatron Bridge: recipe defaults < dataset preset < shortcuts < trailing
KEY=VALUE overrides (`+KEY=VALUE` adds, `~KEY` removes). Unknown keys are accepted: the
stand-in cannot know every ConfigContainer field, it records what it was given.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
from dataclasses import dataclass, field
from typing import Any

MODES = ("pretrain", "sft", "lora", "dora")

# What a recipe would provide. Checkpoint paths default like Bridge recipes do
# (<cwd>/nemo_experiments/default/checkpoints), so a rerun in the same directory resumes.
def recipe_defaults(cwd: str) -> dict[str, Any]:
    ckpt = os.path.join(cwd, "nemo_experiments", "default", "checkpoints")
    return {
        "train.train_iters": 20,
        "train.global_batch_size": 8,
        "train.micro_batch_size": 1,
        "train.iterations_to_skip": [],
        "model.seq_length": 4096,
        "model.tensor_model_parallel_size": 1,
        "model.pipeline_model_parallel_size": 1,
        "model.context_parallel_size": 1,
        "model.virtual_pipeline_model_parallel_size": None,
        "model.expert_model_parallel_size": 1,
        "model.expert_tensor_parallel_size": None,
        "optimizer.lr": 3.0e-4,
        "optimizer.min_lr": 3.0e-5,
        "scheduler.lr_warmup_iters": 0,
        "checkpoint.save": ckpt,
        "checkpoint.load": ckpt,
        "checkpoint.save_interval": None,
        "checkpoint.ckpt_step": None,
        "checkpoint.most_recent_k": -1,
        "checkpoint.pretrained_checkpoint": None,
        "checkpoint.ckpt_format": "torch_dist",
        "rng.seed": 1234,
        "logger.log_interval": 1,
        # Megatron-LM TrainingConfig: no exit handler unless asked for; it catches SIGTERM
        "train.exit_signal_handler": False,
        "train.exit_signal": signal.SIGTERM,
    }


# shortcut dest -> config key (run_recipe.py's shortcuts)
SHORTCUTS = {
    "max_steps": "train.train_iters",
    "global_batch_size": "train.global_batch_size",
    "micro_batch_size": "train.micro_batch_size",
    "seq_length": "model.seq_length",
    "tensor_model_parallel_size": "model.tensor_model_parallel_size",
    "pipeline_model_parallel_size": "model.pipeline_model_parallel_size",
    "context_parallel_size": "model.context_parallel_size",
    "virtual_pipeline_model_parallel_size": "model.virtual_pipeline_model_parallel_size",
    "expert_model_parallel_size": "model.expert_model_parallel_size",
    "expert_tensor_parallel_size": "model.expert_tensor_parallel_size",
    "lr": "optimizer.lr",
    "min_lr": "optimizer.min_lr",
    "warmup_iters": "scheduler.lr_warmup_iters",
    "pretrained_checkpoint": "checkpoint.pretrained_checkpoint",
    "save_dir": "checkpoint.save",
    "load_dir": "checkpoint.load",
    "save_interval": "checkpoint.save_interval",
}

_OVERRIDE = re.compile(r"^(?P<op>[+~]?)(?P<key>[A-Za-z_][A-Za-z0-9_.]*)(?:=(?P<value>.*))?$", re.S)


class ConfigError(Exception):
    """Bad command line (exit code 2, like argparse)."""


@dataclass
class RunConfig:
    argv: list[str]
    recipe: str | None
    model: str | None
    mode: str
    dataset: str | None
    dry_run: bool
    values: dict[str, Any]
    overrides: list[str] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_recipe.py (stand-in)", allow_abbrev=False)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--recipe")
    who.add_argument("--model")
    p.add_argument("--mode", choices=MODES)
    p.add_argument("--dataset")
    p.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true")
    ints = [
        (("-ms", "--max_steps"), "max_steps"),
        (("-gb", "--global_batch_size"), "global_batch_size"),
        (("-mb", "--micro_batch_size"), "micro_batch_size"),
        (("-sl", "--seq_length"), "seq_length"),
        (("-tp", "--tensor_model_parallel_size"), "tensor_model_parallel_size"),
        (("-pp", "--pipeline_model_parallel_size"), "pipeline_model_parallel_size"),
        (("-cp", "--context_parallel_size"), "context_parallel_size"),
        (("-vp", "--virtual_pipeline_model_parallel_size"), "virtual_pipeline_model_parallel_size"),
        (("-ep", "--expert_model_parallel_size"), "expert_model_parallel_size"),
        (("-etp", "--expert_tensor_parallel_size"), "expert_tensor_parallel_size"),
        (("--warmup_iters",), "warmup_iters"),
        (("--save_interval",), "save_interval"),
    ]
    for flags, dest in ints:
        p.add_argument(*flags, dest=dest, type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--min_lr", type=float)
    for name in ("pretrained_checkpoint", "save_dir", "load_dir"):
        p.add_argument(f"--{name}", dest=name)
    return p


def parse_value(text: str) -> Any:
    """Hydra-ish scalar parsing: ints, floats, booleans, null, [a,b] lists; else the text verbatim."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [parse_value(x.strip()) for x in inner.split(",")] if inner else []
    return text


def infer_mode(recipe: str | None) -> str:
    name = recipe or ""
    if "_sft" in name:
        return "sft"
    if "_peft" in name:
        return "lora"
    return "pretrain"


def parse(argv: list[str], cwd: str | None = None) -> RunConfig:
    parser = _parser()
    try:
        ns, extra = parser.parse_known_args(argv)
    except SystemExit as exc:  # argparse already printed usage (or --help)
        if exc.code == 0:
            raise
        raise ConfigError(f"bad arguments (argparse exit {exc.code})") from None
    matches = []
    for arg in extra:
        m = _OVERRIDE.match(arg)
        if arg.startswith("-") or not m or (m.group("op") != "~" and m.group("value") is None):
            raise ConfigError(f"unrecognized argument {arg!r} (expected KEY=VALUE, +KEY=VALUE or ~KEY)")
        matches.append(m)

    values = recipe_defaults(cwd or os.getcwd())
    for dest, key in SHORTCUTS.items():
        given = getattr(ns, dest)
        if given is not None:
            values[key] = given
    for m in matches:
        key = m.group("key")
        if m.group("op") == "~":
            values[key] = None
        else:
            values[key] = parse_value(m.group("value"))

    mode = ns.mode or infer_mode(ns.recipe)
    if ns.dataset == "mock" and mode != "pretrain":
        raise ConfigError(f"--dataset mock is for pretraining only, not --mode {mode}")
    return RunConfig(
        argv=list(argv),
        recipe=ns.recipe,
        model=ns.model,
        mode=mode,
        dataset=ns.dataset,
        dry_run=ns.dry_run,
        values=values,
        overrides=list(extra),
    )
