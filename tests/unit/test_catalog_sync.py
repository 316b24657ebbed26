"""catalog sync: the static extractor on a miniature Megatron Bridge tree, the name parser, the
JSON writer, and (marked `network`) the real megatron-bridge 0.6.2 wheel from PyPI against the
committed catalog."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mbridge_launch.base.errors import UserError
from mbridge_launch.catalog_sync.names import parse_recipe_name
from mbridge_launch.catalog_sync.sync import build_catalog, render_catalog, sync
from mbridge_launch.catalog_sync.writer import dump_catalog
from mbridge_launch.cli.main import main
from mbridge_launch.knowledge.catalog import load_catalog

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "catalog" / "megatron-bridge-0.6.2.json"


def _load_fixture():
    path = Path(__file__).resolve().parents[1] / "fixtures" / "catalog" / "mini_bridge.py"
    spec = importlib.util.spec_from_file_location("mini_bridge", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mini = _load_fixture()


@pytest.fixture(scope="module")
def mini_records(tmp_path_factory):
    root = mini.write_tree(tmp_path_factory.mktemp("tree"))
    version, origin, records = build_catalog(root)
    return version, {(r["kind"], r["name"]): r for r in records}


def _codes(record):
    return [f["code"] for f in record["findings"]]


# --- the extractor on the miniature tree -------------------------------------------------------
def test_exported_names_canonical_and_aliases(mini_records):
    version, records = mini_records
    assert version == mini.VERSION  # from package_info.py (no METADATA in a tree)
    library = {name for kind, name in records if kind == "library"}
    assert library == {
        "toy_7b_pretrain_8gpu_h100_bf16_config", "toy_7b_pretrain_4gpu_h100_bf16_16k_config",
        "toy_7b_pretrain_8gpu_h100_fp8cs_config", "toy_moe_pretrain_4gpu_h100_bf16_config",
        "toy_7b_peft_1gpu_h100_bf16_config", "toy_7b_sft_1gpu_h100_bf16_config", "toy_tiny_pretrain_config",
    }  # set_toy_layout is exported but is a helper, not a recipe
    assert records[("library", "toy_7b_pretrain_8gpu_h100_bf16_config")]["aliases"] == ["toy_7b_pretrain_config"]
    assert records[("library", "toy_7b_sft_1gpu_h100_bf16_config")]["aliases"] == ["toy_7b_sft_config"]
    # a benchmark name bound by plain assignment is an alias of the function it names
    bench = records[("benchmark", "toy_7b_pretrain_16gpu_h100_bf16_config")]
    assert bench["aliases"] == ["toy_7b_pretrain_16gpu_b200_bf16_config"]
    assert "alias_differs" in _codes(bench)
    # same name, two different functions: both kept, told apart by kind
    assert ("benchmark", "toy_7b_pretrain_8gpu_h100_bf16_config") in records


def test_values_follow_helpers_and_dataclass_defaults(mini_records):
    _, records = mini_records
    r = records[("library", "toy_7b_pretrain_8gpu_h100_bf16_config")]
    assert (r["tensor_model_parallel_size"], r["pipeline_model_parallel_size"], r["context_parallel_size"]) == (2, 2, 2)
    assert r["expert_model_parallel_size"] == 1  # Megatron Core default, never set by the recipe
    assert r["virtual_pipeline_model_parallel_size"] is None
    assert r["global_batch_size"] == 64 and r["micro_batch_size"] == 1  # helper kwarg / dataclass default
    assert r["train_iters"] == 300  # an unknown branch that assigns the same value keeps it
    assert r["seq_length"] == 2048 and r["dataset_seq_length"] == 2048
    assert r["hf_model_id"] == "toy-org/Toy-7B"
    assert r["features"]["cp_comm_type"] == "p2p"  # `if cfg.model.context_parallel_size > 1` was taken
    assert r["features"]["precision_recipe"] == "bf16_mixed"
    assert r["dataset"]["selector"] == "mock"
    assert r["env_vars"] == {"NCCL_NVLS_ENABLE": 0, "TORCH_NCCL_AVOID_RECORD_STREAMS": 1}
    assert (r["model"], r["mode"], r["hardware"], r["gpus"], r["precision"], r["variant"]) == (
        "toy_7b", "pretrain", "h100", 8, "bf16", None)
    assert r["findings"] == []


def test_peft_scheme_from_default_argument(mini_records):
    _, records = mini_records
    r = records[("library", "toy_7b_peft_1gpu_h100_bf16_config")]
    assert r["peft_scheme"] == "dora"
    assert r["global_batch_size"] == 8


def test_findings_grid_seq_gbs_raise(mini_records):
    _, records = mini_records
    long = records[("library", "toy_7b_pretrain_4gpu_h100_bf16_16k_config")]
    assert long["variant"] == "16k"
    assert {"grid_exceeds_gpus", "seq_length_mismatch"} <= set(_codes(long))
    assert "TP x PP x CP = 2 x 2 x 2 = 8 GPUs" in long["findings"][_codes(long).index("grid_exceeds_gpus")]["message"]
    gbs = records[("library", "toy_7b_pretrain_8gpu_h100_fp8cs_config")]
    assert "gbs_not_divisible" in _codes(gbs)  # 6 % (MBS 1 x DP 4)
    assert "precision_mismatch" in _codes(gbs)  # fp8cs in the name, bf16_mixed applied
    moe = records[("library", "toy_moe_pretrain_4gpu_h100_bf16_config")]
    assert "expert_grid_exceeds_gpus" in _codes(moe)  # PP 1 x EP 8 x ETP 1 > 4
    raising = records[("library", "toy_7b_sft_1gpu_h100_bf16_config")]
    assert raising["raises_not_implemented"] is True
    assert _codes(raising) == ["raises_not_implemented"]
    assert raising["tensor_model_parallel_size"] is None
    irregular = records[("library", "toy_tiny_pretrain_config")]
    assert irregular["gpus"] is None and "name_irregular" in _codes(irregular)
    for finding in long["findings"]:
        assert finding["message"] and finding["message_zh"] and finding["severity"] in ("error", "warning", "info")


def test_benchmark_follows_library_recipe_and_perf_helper(mini_records):
    _, records = mini_records
    r = records[("benchmark", "toy_7b_pretrain_16gpu_h100_bf16_config")]
    assert r["train_iters"] == 50  # _benchmark_common
    assert r["global_batch_size"] == 256
    assert r["features"]["moe_router_force_load_balancing"] is True
    assert r["tensor_model_parallel_size"] == 2  # from the library recipe it calls
    fp8 = records[("benchmark", "toy_7b_pretrain_8gpu_h100_bf16_config")]
    assert fp8["features"]["precision_recipe"] == "bf16_with_fp8_current_scaling_mixed"
    assert fp8["features"]["fp8"] == "hybrid"
    assert "precision_mismatch" in _codes(fp8)


def test_wheel_and_tree_agree_and_sync_is_deterministic(tmp_path):
    wheel = mini.write_wheel(tmp_path / "src", tmp_path / f"megatron_bridge-{mini.VERSION}-py3-none-any.whl")
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    first = sync(wheel, out1)
    second = sync(wheel, out2)
    assert first.path.name == f"megatron-bridge-{mini.VERSION}.json"  # version from the wheel's METADATA
    assert first.path.read_bytes() == second.path.read_bytes()
    _, _, from_tree = build_catalog(tmp_path / "src")
    _, _, from_wheel = build_catalog(wheel)
    assert from_tree == from_wheel
    data = json.loads(first.path.read_text(encoding="utf-8"))
    assert data["comment"].startswith(f"Generated by `mbridge-launch catalog sync --from {wheel.name}`")
    assert data["recipes"] == from_wheel
    assert (first.library, first.aliases, first.benchmark) == (7, 3, 2)


def test_sync_command_writes_catalog(tmp_path, capsys):
    root = mini.write_tree(tmp_path / "tree")
    assert main(["catalog", "sync", "--from", str(root), "--out", str(tmp_path / "out"), "--format", "json"]) == 0
    assert (tmp_path / "out" / f"megatron-bridge-{mini.VERSION}.json").is_file()
    assert '"library": 7' in capsys.readouterr().out
    catalog = load_catalog(directory=tmp_path / "out")
    assert catalog.get("toy_7b_pretrain_config").name == "toy_7b_pretrain_8gpu_h100_bf16_config"


def test_sync_rejects_what_is_not_megatron_bridge(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError) as info:
        build_catalog(tmp_path / "empty")
    assert info.value.key == "catalog.sync.not_bridge"
    bad = tmp_path / "bad.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UserError) as info:
        build_catalog(bad)
    assert info.value.key == "catalog.sync.bad_wheel"
    assert main(["catalog", "sync", "--from", str(tmp_path / "missing.whl"), "--out", str(tmp_path)]) == 2


# --- names and writer ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, expected",
    [
        ("llama3_8b_pretrain_2gpu_h100_bf16_config", ("llama3_8b", "pretrain", 2, "h100", "bf16", None, True)),
        ("qwen3_30b_a3b_sft_16gpu_h100_bf16_config", ("qwen3_30b_a3b", "sft", 16, "h100", "bf16", None, True)),
        ("llama3_8b_pretrain_64gpu_h100_bf16_128k_config", ("llama3_8b", "pretrain", 64, "h100", "bf16", "128k", True)),
        ("qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_large_scale_config",
         ("qwen3_235b_a22b", "pretrain", 256, "gb200", "fp8mx", "large_scale", True)),
        ("nemotron_3_super_pretrain_config", ("nemotron_3_super", "pretrain", None, None, None, None, False)),
        ("set_toy_layout", (None, None, None, None, None, None, False)),
    ],
)
def test_parse_recipe_name(name, expected):
    parsed = parse_recipe_name(name)
    assert (parsed.model, parsed.mode, parsed.gpus, parsed.hardware, parsed.precision, parsed.variant,
            parsed.regular) == expected


def test_writer_output_is_json_in_the_given_order():
    tricky = ["yes", "null", "1.5", "a: b", "x # y", "-lead", "中文：说明", "tab\there", "line\u2028sep",
              "nel\u0085bom\ufeff", "0.6.2", ""]
    records = [{
        "name": "r_config", "kind": "library", "aliases": ["a", "b"], "value": 1e-05, "big": 131072,
        "neg": -3, "flag": True, "none": None, "text": text, "dataset": {"selector": "mock", "nested": [1, 2.5, None]},
        "findings": [{"code": "c", "message": text}],
    } for text in tricky]
    meta = {"schema": 1, "megatron_bridge_version": "0.6.2"}
    out = dump_catalog("header", meta, records)
    assert out == dump_catalog("header", meta, records) and out.endswith("}\n")
    loaded = json.loads(out)
    assert loaded == {"comment": "header", **meta, "recipes": records}
    assert list(loaded["recipes"][0]) == list(records[0])  # the extractor's key order, not sorted
    assert [r["text"] for r in loaded["recipes"]] == tricky
    assert "中文：说明" in out  # readable in a diff
    assert not any(ch in out for ch in "\u2028\u0085\ufeff") and "\\u2028" in out  # escaped, not raw
    assert out.splitlines()[1] == ' "comment": "header",'  # one value per line, indent 1
    with pytest.raises(ValueError):
        dump_catalog("header", meta, [{"name": "x", "value": float("nan")}])  # no JSON form


# --- the real wheel (network) ------------------------------------------------------------------------
def _wheel(request, tmp_path_factory) -> Path:
    """The wheel, downloaded once into pytest's cache (.pytest_cache) so reruns are fast."""
    if getattr(request.config, "cache", None) is not None:
        cache = Path(request.config.cache.mkdir("megatron-bridge-0.6.2-wheel"))
    else:  # -p no:cacheprovider
        cache = tmp_path_factory.getbasetemp() / "megatron-bridge-0.6.2-wheel"
        cache.mkdir(exist_ok=True)
    found = sorted(cache.glob("megatron_bridge-0.6.2-*.whl"))
    if found:
        return found[0]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
               "--retries", "2", "--timeout", "30", "megatron-bridge==0.6.2", "-d", str(cache)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
        ok, detail = proc.returncode == 0, (proc.stderr or proc.stdout)[-800:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, detail = False, str(exc)
    found = sorted(cache.glob("megatron_bridge-0.6.2-*.whl"))
    if ok and found:
        return found[0]
    reason = f"cannot download megatron-bridge==0.6.2 from PyPI ({' '.join(command[2:])}): {detail}"
    if os.environ.get("MBRIDGE_LAUNCH_OFFLINE") == "1":
        pytest.skip("MBRIDGE_LAUNCH_OFFLINE=1: " + reason)
    pytest.fail(reason + "\n(no network? set MBRIDGE_LAUNCH_OFFLINE=1 to skip this test)")


def _exported_names(wheel: Path) -> tuple[set[str], set[str]]:
    """Every exported recipe name, read independently of catalog_sync: the star imports of
    megatron.bridge.recipes (each package's __all__, else its public names) and the names each
    megatron.bridge.perf_recipes.<family> package imports."""
    with zipfile.ZipFile(wheel) as archive:
        files = {n: archive.read(n).decode() for n in archive.namelist() if n.endswith(".py")}

    def module_file(dotted: str) -> str:
        base = dotted.replace(".", "/")
        return f"{base}/__init__.py" if f"{base}/__init__.py" in files else f"{base}.py"

    def public_names(dotted: str) -> set[str]:
        tree = ast.parse(files[module_file(dotted)])
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                return {e.value for e in node.value.elts}
        names = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                if node.names[0].name == "*":
                    names |= public_names(node.module)
                else:
                    names |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.FunctionDef):
                names.add(node.name)
        return {n for n in names if not n.startswith("_")}

    library = {n for n in public_names("megatron.bridge.recipes") if "_config" in n}
    benchmark = set()
    for path in files:
        parts = path.split("/")
        if len(parts) == 5 and parts[2] == "perf_recipes" and parts[4] == "__init__.py":
            benchmark |= public_names(f"megatron.bridge.perf_recipes.{parts[3]}")
    return library, benchmark


@pytest.mark.network
def test_real_wheel_reproduces_committed_catalog(request, tmp_path, tmp_path_factory):
    wheel = _wheel(request, tmp_path_factory)
    result = sync(wheel, tmp_path)
    assert result.path.name == COMMITTED.name
    assert result.path.read_bytes() == COMMITTED.read_bytes(), (
        "catalog sync no longer reproduces catalog/megatron-bridge-0.6.2.json; regenerate it with "
        f"`mbridge-launch catalog sync --from {wheel} --out catalog/` and review the diff"
    )
    catalog = load_catalog("0.6.2")
    library, benchmark = _exported_names(wheel)
    assert len(library) > 500 and len(benchmark) > 400
    missing_library = sorted(n for n in library if catalog.get(n, kind="library") is None)
    missing_benchmark = sorted(n for n in benchmark if catalog.get(n, kind="benchmark") is None)
    assert missing_library == [] and missing_benchmark == []


def test_render_matches_committed_header():
    """The committed catalog is the writer's output for the 0.6.2 wheel (offline check)."""
    text = COMMITTED.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["comment"].startswith("Generated by `mbridge-launch catalog sync --from megatron_bridge-0.6.2-py3-none-any.whl`")
    rendered = render_catalog(data["megatron_bridge_version"], data["generated_from"], data["recipes"])
    assert rendered == text  # re-emitting the parsed data gives the same bytes: the format is canonical


# --- interpreter constructs ------------------------------------------------------------------------------
PROBE = '''
import os
from dataclasses import dataclass, field, replace
from functools import partial

@dataclass
class Base:
    a: int = 1
    items: list = field(default_factory=list)

class Child(Base):
    def __init__(self, b, **kwargs):
        super().__init__(**kwargs)
        self.b = b

    @property
    def total(self):
        return self.a + self.b

def make_adder(n):
    def add(x):
        return x + n
    return add

def scale(x, factor=2):
    return x * factor

def loops():
    out = []
    for i in range(10):
        if i == 4:
            break
        if i % 2:
            continue
        out.append(i)
    n = 0
    while n < 3:
        n += 1
    return out, n, [v * v for v in out if v], {k: len(k) for k in ("ab", "c")}, f"{n:03d}-{out[-1]!r}"

def guarded(kind):
    if isinstance(kind, list):
        return "list"
    raise TypeError("unexpected")

def unknown_branch():
    value = 1
    same = 5
    if os.environ.get("FLAG"):
        value = 2
        same = 5
    return value, same

def handled():
    try:
        raise ValueError("x")
    except ValueError:
        return "caught"

def probe():
    child = Child(3, a=4)
    clone = replace(Base(), a=7)
    return (child.total, child.items, clone.a, make_adder(5)(1), partial(scale, factor=3)(2), loops(),
            guarded(os.environ.get("KIND")), unknown_branch(), handled())
'''


def test_interpreter_constructs(tmp_path):
    from mbridge_launch.catalog_sync.interp import Interpreter
    from mbridge_launch.catalog_sync.source import open_source
    from mbridge_launch.catalog_sync.values import Unknown

    (tmp_path / "megatron" / "bridge").mkdir(parents=True)
    (tmp_path / "megatron" / "bridge" / "__init__.py").write_text("")
    (tmp_path / "megatron" / "bridge" / "probe.py").write_text(PROBE)
    interp = Interpreter(open_source(tmp_path))
    probe = interp.resolve(interp.load_module("megatron.bridge.probe").namespace["probe"])
    total, items, clone_a, added, scaled, loops, guarded, branch, handled = interp.call(probe, [], {})
    assert (total, items, clone_a, added, scaled) == (7, [], 7, 6, 6)
    assert loops == ([0, 2], 3, [4], {"ab": 2, "c": 1}, "003-2")
    assert guarded == "list"  # the raise only guards the other case
    value, same = branch
    assert isinstance(value, Unknown) and same == 5  # differing values merge to unknown, equal ones stay
    assert handled == "caught"
