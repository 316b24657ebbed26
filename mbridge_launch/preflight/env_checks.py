"""Environment and secrets: secrets travel by NAME only. Every secret named by the Plan must be
set where the job is submitted; no secret value may appear in the Plan, its overrides or the
rendered script; and values shaped like tokens are refused wherever a Plan holds free text.

Messages name the secret and where it was found, never the value.
"""

from __future__ import annotations

import re
from typing import Iterable

from mbridge_launch.preflight.context import PreflightContext, run_all
from mbridge_launch.preflight.model import Check

# Token shapes of common services (prefixes documented by each vendor).
TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("NVIDIA NGC / API key", re.compile(r"\bnvapi-[A-Za-z0-9_-]{30,}\b")),
    ("OpenAI-style API key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}\b")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
)
# Weights & Biases API keys are 40 hex digits; so are git commit ids, so this shape counts only
# where the setting's name says it is a key.
_HEX40 = re.compile(r"\b[0-9a-f]{40}\b")
_SECRET_WORDS = {"token", "secret", "password", "passwd", "credential", "credentials", "apikey", "pat"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key")}
WELL_KNOWN_SECRETS = (
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "GH_TOKEN", "GITHUB_TOKEN", "NGC_API_KEY",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "OPENAI_API_KEY", "COMET_API_KEY", "NEPTUNE_API_TOKEN",
)
MIN_SECRET_LEN = 8  # shorter values would match ordinary text by chance


def secret_named(name: str) -> bool:
    """Does a setting's name say it holds a secret? Word-wise, so that `tokenizer.tokenizer_model`
    and `max_tokens` are not secrets but `HF_TOKEN` and `WANDB_API_KEY` are."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return any(w in _SECRET_WORDS for w in words) or any(pair in _SECRET_PAIRS for pair in zip(words, words[1:]))


def token_kind(text: str, name_hint: str = "") -> str | None:
    """The kind of token `text` contains, or None."""
    for kind, pattern in TOKEN_PATTERNS:
        if pattern.search(text):
            return kind
    if _HEX40.search(text) and (secret_named(name_hint) or "wandb" in name_hint.lower()):
        return "40-hex API key (Weights & Biases)"
    return None


def run_env_checks(ctx: PreflightContext) -> list[Check]:
    return run_all(ctx, (check_names, check_override_values, check_plan_fields, check_secret_values))


def check_names(ctx: PreflightContext) -> list[Check]:
    cluster = ctx.plan.cluster
    checks: list[Check] = []
    # the names are environment variable names (plan.model refuses others at load)
    for name in cluster.secrets:
        if not ctx.env.get(name):
            checks.append(Check("env.secret_missing", "error", {"name": name}, subject=name))
    for name in cluster.env:
        if name not in ctx.env and name not in ctx.plan.env_vars:
            checks.append(Check("env.forward_missing", "warning", {"name": name}, subject=name))
    for name in ctx.plan.env_vars:
        if name in WELL_KNOWN_SECRETS or (secret_named(name) and ctx.plan.env_vars[name]):
            checks.append(Check("env.secret_in_env_vars", "error", {"name": name}, subject=name))
    return checks


def check_override_values(ctx: PreflightContext) -> list[Check]:
    """A token-shaped value in an override is refused: it would be written into the script, the
    Plan file, the ledger and the job's command line for anyone to read."""
    checks: list[Check] = []
    for override in ctx.plan.overrides:
        kind = token_kind(override.value, override.key)
        if kind is None and secret_named(override.key) and override.value.strip() and not override.value.startswith("$"):
            kind = "literal value of a secret-named setting"
        if kind:
            checks.append(Check("env.token_in_override", "error", {"setting": override.key, "kind": kind}, subject=override.key))
    return checks


def _free_text_fields(ctx: PreflightContext) -> Iterable[tuple[str, str, str]]:
    """(where, name hint, value) of every free-text field of the Plan outside the overrides."""
    plan = ctx.plan
    for name, value in plan.env_vars.items():
        yield f"env_vars.{name}", name, value
    for i, arg in enumerate(plan.cluster.srun_args):
        yield f"cluster.srun_args[{i}]", arg, arg
    for i, arg in enumerate(plan.cluster.sbatch_args):
        yield f"cluster.sbatch_args[{i}]", arg, arg
    for i, line in enumerate(plan.launch.setup):
        yield f"launch.setup[{i}]", line, line
    for i, arg in enumerate(plan.launch.entry):
        yield f"launch.entry[{i}]", arg, arg
    for key, value in plan.dataset.fields.items():
        yield f"dataset.fields.{key}", key, value
    if plan.cluster.container_image:
        yield "cluster.container_image", "", plan.cluster.container_image


def check_plan_fields(ctx: PreflightContext) -> list[Check]:
    checks: list[Check] = []
    for where, hint, value in _free_text_fields(ctx):
        kind = token_kind(value, hint)
        if kind:
            checks.append(Check("env.token_in_plan", "error", {"where": where, "kind": kind}, subject=where))
    return checks


def secret_values(ctx: PreflightContext) -> dict[str, str]:
    """Values of the secrets the Plan names, plus well-known secret variables that happen to be
    set where preflight runs (a leak of those is as bad)."""
    names = set(ctx.plan.cluster.secrets) | {n for n in WELL_KNOWN_SECRETS if n in ctx.env}
    return {n: ctx.env[n] for n in sorted(names) if len(ctx.env.get(n, "")) >= MIN_SECRET_LEN}


def check_secret_values(ctx: PreflightContext) -> list[Check]:
    values = secret_values(ctx)
    if not values:
        return []
    places: list[tuple[str, str]] = [(f"override {o.key}", o.value) for o in ctx.plan.overrides]
    places.append(("plan", ctx.plan_yaml()))
    script = ctx.rendered_script()
    if script.ok:
        places.append(("rendered script", script.value))
    checks: list[Check] = []
    for name, value in values.items():
        for where, text in places:
            if value in text:
                checks.append(Check("env.secret_leaked", "error", {"name": name, "where": where}, subject=name))
                break
    return checks
