"""Where a Hugging Face model's config.json lies in the local hub cache (nothing is downloaded).

Its own module because both the model catalog (knowledge/models.py: the hint for an id outside the
catalog) and the config reader (knowledge/hf_config.py, which builds on models.ModelArch) use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def cached_hf_config(hf_id: str, environ: Any = None) -> Path | None:
    """The config.json of `hf_id` ('org/name') in the local Hugging Face hub cache, newest
    snapshot first, or None. The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub (huggingface_hub's own order); nothing is downloaded."""
    import os

    env = os.environ if environ is None else environ
    parts = hf_id.strip().strip("/").split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        return None
    if env.get("HF_HUB_CACHE"):
        hub = Path(env["HF_HUB_CACHE"])
    elif env.get("HF_HOME"):
        hub = Path(env["HF_HOME"]) / "hub"
    else:
        hub = Path(env.get("HOME") or Path.home()) / ".cache" / "huggingface" / "hub"
    snapshots = hub / f"models--{parts[0]}--{parts[1]}" / "snapshots"
    try:
        found = [c for c in snapshots.glob("*/config.json") if c.is_file()]
    except OSError:
        return None
    return max(found, key=lambda c: c.stat().st_mtime, default=None)
