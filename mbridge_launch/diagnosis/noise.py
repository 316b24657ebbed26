"""What a log line is stripped of before it is read, and the lines that are never evidence.

Prefixes carry the rank (`[rank3]:` from torchrun's --log-line-prefix, `[default3]:` from --tee,
srun --label's `3: `); they are removed first so that a traceback interleaved with other ranks'
output still reads as one. Noise: Python warnings (the `UserWarning:` line and the source line the
warnings module prints under it), CUDA allocator notices, NCCL INFO lines and C++ frame dumps,
torch.distributed.elastic's SIGTERM forwarding, srun's own progress lines. They often contain the
word "error" and would otherwise bury the real one.
"""

from __future__ import annotations

import re

_PREFIXES = (
    re.compile(r"^\[rank(\d+)\]:\s?"),
    re.compile(r"^\[default(\d+)\]:\s?"),
    re.compile(r"^(\d{1,6}): "),  # srun --label
)

_WARNING = re.compile(r"\b(?:UserWarning|FutureWarning|DeprecationWarning|RuntimeWarning|ResourceWarning"
                      r"|PendingDeprecationWarning|SyntaxWarning|ImportWarning)\b:")
# literal pieces (a substring test is ten times cheaper than a regex search on a long line)
_NOISE_TEXT = ("NCCL INFO", "closing signal SIGTERM", "expandable_segments not supported", "CUDAAllocatorConfig",
               "WARNING: Logging before InitGoogleLogging")
_NOISE_START = re.compile(
    r"^(?:frame #\d+:|Exception raised from \w+ at |\s*\[W(?:\d{4}| )"  # c10 frame dumps, c10 warnings
    r"|srun: (?:Job step aborted|forcing job termination|launch/slurm: _step_signal|Terminating StepId)"
    r"|\s*(?:warnings\.warn|warn|logger\.warning)\()"
)
# the allocator's notice when it stands alone on a line (inside an OOM message it is part of it)
_ALLOCATOR = re.compile(r"^\s*(?:If reserved but unallocated memory is large )?try setting "
                        r"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


def strip_prefixes(text: str) -> tuple[str, int | None]:
    """The line without its rank prefixes, and the rank they named (the innermost wins)."""
    rank: int | None = None
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            m = prefix.match(text)
            if m:
                rank = int(m.group(1))
                text = text[m.end():]
                changed = True
    return text, rank


def is_warning(text: str) -> bool:
    """A Python warning line (its next line, the source line, is noise too)."""
    return bool(_WARNING.search(text))


def is_noise(text: str) -> bool:
    return any(piece in text for piece in _NOISE_TEXT) or bool(_NOISE_START.match(text) or _ALLOCATOR.match(text))
