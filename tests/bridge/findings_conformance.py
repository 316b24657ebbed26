"""Findings conformance (issue 15): the catalog's static findings against the real validation.

Each recipe is built and validated by the real Megatron Bridge 0.6.2 at the GPU count in its name
(build_recipe.py `--all all --placeholder-inputs`). Two directions:

(a) every recipe the real code rejects (built, not validated, stage validate/override; or a recipe
    function that itself raises NotImplementedError) must carry a catalog finding whose code
    PREDICTS that real error (`PREDICTS`: a regex over "Type: message" of the real error, and why);
(b) every static ERROR finding either agrees (the real code rejects that recipe with the error the
    code predicts, or with the error of another of its findings that validation hits first), or is
    listed in `NOT_CONFIRMED` with the reason the real validation cannot or does not see it.

Rubin (r100 / vr200) results rest on an assumed device (fake_gpu.py, not_verified.py "gpu-rubin"):
not evidence either way; they are counted as not checkable. `STAND_IN_REJECTIONS` lists rejections
that exist only because of the tier's stand-ins (none outside Rubin in the 0.6.2 run).

Plain Python (3.10-3.12), no torch: the test (test_findings_conformance.py) and a reader at a shell
(`python tests/bridge/findings_conformance.py RESULTS.jsonl`) use the same functions.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CATALOG = ROOT / "catalog" / "megatron-bridge-0.6.2.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mbridge_launch.catalog_sync.conformance import PREDICTS, error_text, is_rejection, predicted_by  # noqa: E402,F401

RUBIN = frozenset({"r100", "vr200"})

# PREDICTS (finding code -> the real error it predicts) is the package's: conformance.py

# static ERROR finding code -> (outcome, why the real validation of this tier does not reject such a
# recipe): "not-checkable" (the real check runs where the tier does not: process group, model build)
# or "stricter" (the finding refuses what Megatron accepts; the reason says why it stays)
NOT_CONFIRMED: dict[str, tuple[str, str]] = {
    "expert_grid_exceeds_gpus": (
        "not-checkable",
        ("the expert grid (PP x EP x ETP within the world) is built by parallel_state."
        "initialize_model_parallel, which needs a process group: the tier never runs it "
        "(not_verified.py no-process-group); ConfigContainer.validate() does not check it"),
    ),
    "RULE_PP_LAYERS": (
        "not-checkable",
        ("an even split of the layers over PP x VP is asserted by get_num_layers_to_build when the model "
        "is built; TransformerConfig checks it only with uneven stages or account_for_* splits"),
    ),
    "RULE_VP_LAYERS": ("not-checkable", "as RULE_PP_LAYERS: checked at model build"),
}

# (error regex, reason) of rejections that exist only because of a stand-in of the tier
STAND_IN_REJECTIONS: tuple[tuple[str, str], ...] = (
    (r"dsa_kernel_backend=cudnn requires fused DSA kernels, but the following packages are not available",
     ("the tier's env has no flash_mla / cudnn-frontend DSA kernels (CUDA builds, like Transformer Engine): "
     "an import probe of the env, not of the recipe; a training container has them")),
    (r"load_kwargs.data_files must contain non-empty paths",
     ("an hf_json recipe reads the user's own JSON files (dataset load_kwargs.data_files), an input that "
     "--placeholder-inputs does not supply (it gives the PEFT checkpoint and the Energon path only)")),
)

# finding code -> the overrides that remove its cause, so that a finding masked by it (validation
# stops at its first error) can be shown by a second real run; {dir} is an existing directory
FIXES: dict[str, tuple[str, ...]] = {
    "data_cache_path_missing": ("dataset.path_to_cache={dir}",),
    "in_batch_packing_mbs1": ("dataset.enable_in_batch_packing=false",),
}


@dataclass
class Rejection:
    name: str
    kind: str
    gpu_type: str
    error: str
    codes: list[str]  # the recipe's catalog finding codes (any severity)
    predicted_by: list[str]  # those whose PREDICTS regex matches the real error


@dataclass
class Verdict:
    code: str
    name: str
    kind: str
    outcome: str  # agrees | agrees-masked | stricter | not-checkable | disagrees (unexplained: a failure)
    why: str
    masked_by: list[str] = field(default_factory=list)  # agrees-masked: the findings the real error matched


@dataclass
class Summary:
    rejected: list[Rejection] = field(default_factory=list)
    rubin_rejected: list[Rejection] = field(default_factory=list)
    stand_in: list[tuple[Rejection, str]] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def unflagged(self) -> list[Rejection]:
        return [r for r in self.rejected if not r.predicted_by]

    def count(self, outcome: str) -> int:
        return sum(1 for v in self.verdicts if v.outcome == outcome)

    def line(self) -> str:
        flagged = len(self.rejected) - len(self.unflagged)
        return (
            f"findings conformance: {len(self.rejected)} recipes rejected by the real validation, "
            f"{flagged} flagged by a finding that predicts the real error, {len(self.unflagged)} not; "
            f"static error findings: {len(self.verdicts)}, agree {self.count('agrees')} "
            f"(+{self.count('agrees-masked')} masked by an earlier real error), "
            f"disagree {self.count('stricter') + self.count('disagrees')} "
            f"({self.count('stricter')} stricter, listed with reasons; {self.count('disagrees')} unexplained), "
            f"not checkable {self.count('not-checkable')}; "
            f"Rubin rejections (assumed device, not evidence) {len(self.rubin_rejected)} "
            f"({sum(1 for r in self.rubin_rejected if r.predicted_by)} of them predicted by a finding), "
            f"stand-in rejections {len(self.stand_in)}"
        )


def catalog_index(catalog: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["kind"], r["name"]): r for r in catalog["recipes"]}


def evaluate(catalog: dict[str, Any], results: list[dict[str, Any]]) -> Summary:
    index = catalog_index(catalog)
    out = Summary()
    for line in results:
        rec = index.get((line.get("kind"), line["name"]))
        if rec is None:
            continue
        codes = [f["code"] for f in rec.get("findings") or []]
        rubin = line.get("gpu_type") in RUBIN
        if is_rejection(line):
            text = error_text(line)
            rej = Rejection(line["name"], line["kind"], line.get("gpu_type"), text, codes, predicted_by(codes, text))
            stand_in = next((why for pattern, why in STAND_IN_REJECTIONS if re.search(pattern, text)), None)
            if rubin:
                out.rubin_rejected.append(rej)
            elif stand_in is not None:
                out.stand_in.append((rej, stand_in))
            else:
                out.rejected.append(rej)
        for f in rec.get("findings") or []:
            if f.get("severity") == "error":
                out.verdicts.append(verdict(f["code"], rec, line, codes, rubin))
    return out


def verdict(code: str, rec: dict[str, Any], line: dict[str, Any], codes: list[str], rubin: bool) -> Verdict:
    def v(outcome: str, why: str, masked_by: list[str] | None = None) -> Verdict:
        return Verdict(code, rec["name"], rec["kind"], outcome, why, masked_by or [])

    if rubin:
        return v("not-checkable", "Rubin: the tier's device is an assumption (fake_gpu.py)")
    if not is_rejection(line) and not line.get("built"):
        return v("not-checkable", f"not built by the tier: {error_text(line)[:120]}")
    if is_rejection(line):
        matched = predicted_by(codes, error_text(line))
        if code in matched:
            return v("agrees", PREDICTS[code][1])
        if matched and code in PREDICTS:
            # validation stops at its first error; this finding's check comes later (see the test)
            return v("agrees-masked", f"rejected first by {', '.join(matched)}", matched)
    if code in NOT_CONFIRMED:
        return v(*NOT_CONFIRMED[code])
    return v("disagrees", f"the real code {'rejects for another reason' if is_rejection(line) else 'validates it'}; "
                          "not in NOT_CONFIRMED")


def masked_jobs(summary: Summary, directory: str) -> tuple[list[dict[str, Any]], list[Verdict]]:
    """One real job per masked verdict: the recipe with the causes validation hit first removed
    (FIXES), so that the next error shows whether this finding's check really rejects it. The
    verdicts without a FIXES entry for a masking code come back second (a test names them)."""
    jobs, unfixable = [], []
    for i, v in enumerate(x for x in summary.verdicts if x.outcome == "agrees-masked"):
        if not all(c in FIXES for c in v.masked_by):
            unfixable.append(v)
            continue
        overrides = [o.format(dir=directory) for c in v.masked_by for o in FIXES[c]]
        jobs.append({"id": f"masked-{i}-{v.code}-{v.name}", "name": v.name, "overrides": overrides,
                     "gpus": None, "gpu_type": None, "placeholders": True, "code": v.code})
    return jobs, unfixable


def table(summary: Summary) -> dict[str, dict[str, int]]:
    """code -> outcome -> count, for the README's table."""
    out: dict[str, dict[str, int]] = {}
    for v in summary.verdicts:
        out.setdefault(v.code, {}).setdefault(v.outcome, 0)
        out[v.code][v.outcome] += 1
    return out


def main(argv: list[str]) -> int:
    results = [json.loads(x) for x in Path(argv[0]).read_text().splitlines() if x.strip()]
    summary = evaluate(json.loads(CATALOG.read_text()), results)
    print(summary.line())
    for code, outcomes in sorted(table(summary).items()):
        print(f"  {code}: {outcomes}")
    for r in summary.unflagged:
        print(f"  UNFLAGGED {r.name}: {r.error[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
