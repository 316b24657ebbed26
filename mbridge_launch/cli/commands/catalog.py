"""`mbridge-launch catalog sync | verify | list | show | diff`: build, check, browse and compare the recipe catalog."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "help.catalog"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.cli.main import add_common
    from mbridge_launch.knowledge.vocabulary import RECIPE_TASKS, recipe_task_of

    sub = parser.add_subparsers(dest="catalog_command", metavar="ACTION", parser_class=type(parser))
    sync = sub.add_parser("sync", help=t("help.catalog.sync"))
    origin = sync.add_mutually_exclusive_group(required=True)
    origin.add_argument("--from", dest="source", metavar="PATH", help=t("help.catalog.sync.from"))
    origin.add_argument("--python", metavar="PATH", help=t("help.catalog.sync.python"))
    sync.add_argument("--out", metavar="DIR", help=t("help.catalog.sync.out"))
    add_common(sync, formats=("text", "json"))

    verify = sub.add_parser("verify", help=t("help.catalog.verify"))
    verify.add_argument("names", nargs="*", metavar="NAME", help=t("help.catalog.verify.names"))
    verify.add_argument("--python", metavar="PATH", help=t("help.catalog.verify.python"))
    verify.add_argument("--kind", choices=("library", "benchmark", "all"), default="library",
                        help=t("help.catalog.verify.kind"))
    verify.add_argument("--present-gpu", action="store_true", help=t("help.catalog.verify.present_gpu"))
    _add_catalog_choice(verify)
    add_common(verify, formats=("text", "json"))

    listing = sub.add_parser("list", help=t("help.catalog.list"))
    listing.add_argument("--family", help=t("help.catalog.list.family"))
    listing.add_argument("--mode", type=recipe_task_of, choices=RECIPE_TASKS, help=t("help.catalog.list.mode"))
    listing.add_argument("--kind", choices=("library", "benchmark"), help=t("help.catalog.list.kind"))
    _add_catalog_choice(listing)
    listing.add_argument("--all", action="store_true", help=t("help.catalog.list.all"))
    add_common(listing)

    show = sub.add_parser("show", help=t("help.catalog.show"))
    show.add_argument("name", metavar="NAME", help=t("help.catalog.show.name"))
    show.add_argument("--kind", choices=("library", "benchmark"), help=t("help.catalog.show.kind"))
    _add_catalog_choice(show)
    add_common(show)

    diff = sub.add_parser("diff", help=t("help.catalog.diff"))
    diff.add_argument("old", metavar="OLD", help=t("help.catalog.diff.old"))
    diff.add_argument("new", metavar="NEW", help=t("help.catalog.diff.new"))
    add_common(diff, formats=("text", "json"))


def _add_catalog_choice(parser: argparse.ArgumentParser) -> None:
    """--catalog-version V (found in the site, user and package folders) or --catalog FILE."""
    from mbridge_launch.base.i18n import t

    which = parser.add_mutually_exclusive_group()
    which.add_argument("--catalog-version", metavar="V", help=t("help.catalog.catalog_version"))
    which.add_argument("--catalog", metavar="FILE", help=t("help.catalog.catalog_file"))


def _chosen_catalog(args: argparse.Namespace) -> Any:
    from mbridge_launch.knowledge.catalog import load_catalog

    return load_catalog(args.catalog_version, file=args.catalog)


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "catalog_command", None)
    if action == "sync":
        return _sync(args)
    if action == "verify":
        return _verify(args)
    if action == "list":
        return _list(args)
    if action == "show":
        return _show(args)
    if action == "diff":
        return _diff(args)
    from mbridge_launch.base.errors import UserError

    raise UserError("arg.choice", flag="catalog ACTION", value=action or "", choices="sync, verify, list, show, diff")


def _sync(args: argparse.Namespace) -> int:
    from mbridge_launch.base.data_dirs import sync_target_dir
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.catalog_sync.sync import sync

    source = args.source
    if source is None:  # --python: the Megatron Bridge installed there, read as a source tree
        from mbridge_launch.catalog_sync.installed import installed_bridge_root

        source = installed_bridge_root(args.python)
    # --out, else $MBRIDGE_LAUNCH_CATALOGS, else the user's data folder: never the package
    result = sync(source, args.out or sync_target_dir())
    if args.format == "json":
        print_json({
            "path": str(result.path), "version": result.version, "library": result.library,
            "aliases": result.aliases, "benchmark": result.benchmark, "with_findings": result.with_findings,
            "seconds": round(result.seconds, 2),
        })
    else:
        print(t("catalog.sync.done", path=result.path, library=result.library, aliases=result.aliases,
                benchmark=result.benchmark, findings=result.with_findings, seconds=result.seconds))
    return 0


SHOWN = 20  # unexplained differences and unflagged rejections listed in text output


def _verify(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json
    from mbridge_launch.catalog_sync.verify import verify
    from mbridge_launch.knowledge.catalog import read_catalog_text

    path = _chosen_catalog(args).path  # loaded once: a corrupt file is one line here, not a traceback below
    data = json.loads(read_catalog_text(path))
    done = [0]

    def progress(line: dict[str, Any]) -> None:
        done[0] += 1
        if args.format != "json" and sys.stderr.isatty():
            print(t("catalog.verify.progress", n=done[0], name=line.get("name")), file=sys.stderr)

    result = verify(args.python, path, data, args.kind, list(args.names), args.present_gpu, progress)
    rep = result.report
    assert rep is not None
    failed = bool(rep.unexplained or rep.unflagged)
    if args.format == "json":
        print_json({
            "python": result.python, "megatron_bridge": result.installed, "catalog": str(path),
            "recipes": rep.recipes, "built": rep.built, "validated": rep.validated, "agree": rep.agree,
            "differences": [{**asdict(d), "reviewed": d not in rep.unexplained} for d in rep.differences],
            "rejections": [asdict(r) for r in rep.rejections],
            "not_built": [{"recipe": n, "reason": r} for n, r in rep.not_built], "passed": not failed,
        })
        return 1 if failed else 0
    print(t("catalog.verify.summary", python=result.python, version=result.installed, recipes=rep.recipes,
            built=rep.built, validated=rep.validated, agree=rep.agree))
    reviewed = len(rep.differences) - len(rep.unexplained)
    print(t("catalog.verify.differences", total=len(rep.differences), reviewed=reviewed, unexplained=len(rep.unexplained)))
    for d in rep.unexplained[:SHOWN]:
        print(t("catalog.verify.difference", recipe=d.name, field=f"{d.stage}: {d.field}", catalog=json.dumps(d.catalog),
                real=json.dumps(d.real)))
    flagged = len(rep.rejections) - len(rep.unflagged)
    print(t("catalog.verify.rejections", total=len(rep.rejections), flagged=flagged, unflagged=len(rep.unflagged)))
    for r in rep.unflagged[:SHOWN]:
        print(t("catalog.verify.rejection", recipe=r.recipe, stage=r.stage, error=r.error[:300]))
    if rep.not_built:
        print(t("catalog.verify.not_built", count=len(rep.not_built), example=rep.not_built[0][1][:200]))
    print(t("catalog.verify.failed" if failed else "catalog.verify.passed"))
    return 1 if failed else 0


def _list(args: argparse.Namespace) -> int:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json

    catalog = _chosen_catalog(args)
    recipes = catalog.filter(family=args.family, mode=args.mode, kind=args.kind)
    if args.format == "json":
        print_json({
            "catalog": _catalog_json(catalog),
            "recipes": [r.to_dict() for r in recipes],
        })
        return 0
    if not recipes:
        print(t("catalog.list.empty"))
        return 0
    print(t("catalog.list.header", count=len(recipes), version=catalog.version, source=catalog.source))
    if catalog.origin != "package":  # a synced or named file: say which one answered
        print(t("catalog.list.from", origin=t(f"catalog.origin.{catalog.origin}"), path=catalog.path))
    lines = _every_recipe(recipes, catalog) if args.all else _per_model(recipes, catalog)
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


# Markers of `catalog list`, each explained by a legend line whenever it is shown:
# ! a recipe with an error finding (a check of the catalog it fails: `catalog show NAME` says which)
# ~ a library recipe run_recipe.py cannot load by any name (a benchmark of that name takes precedence)
# x a recipe that raises NotImplementedError in this release
_MARKERS = ("!", "~", "x")


def _marks(recipe: Any, catalog: Any) -> str:
    marks = "!" if recipe.errors else ""
    if recipe.kind == "library" and catalog.run_recipe_name(recipe.name) is None:
        marks += "~"
    if recipe.raises_not_implemented:
        marks += "x"
    return marks


def _legend(shown: set[str]) -> list[str]:
    from mbridge_launch.base.i18n import t

    names = {"!": "error", "~": "shadowed", "x": "not_implemented"}
    return [t(f"catalog.list.legend.{names[m]}") for m in _MARKERS if m in shown]


def _every_recipe(recipes: list[Any], catalog: Any) -> list[str]:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.terminal import pad

    lines: list[str] = []
    shown: set[str] = set()
    for recipe in recipes:
        marks = _marks(recipe, catalog)
        shown.update(marks)
        alias = f"  ({', '.join(recipe.aliases)})" if recipe.aliases else ""
        kind = pad(t(f"card.kind_short.{recipe.kind}"), 9)  # the reader's word: 库 | 性能 in Chinese
        lines += [f"{marks or ' ':3} {kind} {recipe.name}{alias}", f"      {_layout_text(recipe)}"]
    return lines + _legend(shown)


def _per_model(recipes: list[Any], catalog: Any) -> list[str]:
    """One line per model: its library recipes per task, its benchmark recipes, and how many carry
    each marker; `--all` gives every recipe with its layout."""
    from collections import Counter

    from mbridge_launch.base.i18n import t

    by_model: dict[str, list[Any]] = {}
    for recipe in recipes:
        by_model.setdefault(recipe.model or "-", []).append(recipe)
    width = max(len(m) for m in by_model)
    lines = [t("catalog.list.models", models=len(by_model))]
    shown: set[str] = set()
    for model in sorted(by_model):
        group = by_model[model]
        tasks = Counter(r.mode for r in group if r.kind == "library")
        parts = []
        if tasks:
            parts.append(t("catalog.list.library", tasks=t("catalog.list.task_separator").join(
                t(f"catalog.list.task.{task}", count=tasks[task]) for task in ("pretrain", "sft", "peft") if tasks[task])))
        benchmarks = sum(1 for r in group if r.kind == "benchmark")
        if benchmarks:
            parts.append(t("catalog.list.benchmark", count=benchmarks))
        marks = Counter(m for r in group for m in _marks(r, catalog))
        shown.update(marks)
        flagged = " ".join(f"{m}{marks[m]}" for m in _MARKERS if marks[m])
        lines.append(f"  {model:{width}}  {t('catalog.list.separator').join(parts)}" + (f"  {flagged}" if flagged else ""))
    return lines + _legend(shown)


def _layout_text(recipe: Any) -> str:
    from mbridge_launch.planner.layout_words import vp_word

    parts = [f"TP={recipe.tp}", f"PP={recipe.pp}", vp_word(recipe.vp)]
    parts += [f"CP={recipe.cp}", f"EP={recipe.ep}"]
    if recipe.etp is not None:
        parts.append(f"ETP={recipe.etp}")
    parts += [f"SP={'on' if recipe.sp else 'off'}", f"MBS={recipe.mbs}", f"GBS={recipe.gbs}", f"seq={recipe.seq_length}"]
    return " ".join(parts)


def _show(args: argparse.Namespace) -> int:
    from mbridge_launch.base.i18n import t
    from mbridge_launch.base.output import print_json

    catalog = _chosen_catalog(args)
    recipe = catalog.require(args.name, kind=args.kind)
    if args.format == "json":
        data = recipe.to_dict()
        data["catalog"] = _catalog_json(catalog)
        print_json(data)
        return 0
    rows = [
        (t("catalog.show.recipe"), recipe.name),
        (t("catalog.show.aliases"), ", ".join(recipe.aliases) or "-"),
        (t("catalog.show.kind"), t(f"catalog.kind.{recipe.kind}")),
        (t("catalog.show.model"), f"{recipe.model} ({recipe.family})"),
        (t("catalog.show.mode"), recipe.mode),
        (t("catalog.show.hardware"), recipe.hardware or "-"),
        (t("catalog.show.gpus"), recipe.gpus if recipe.gpus is not None else "-"),
        (t("catalog.show.precision"), recipe.precision or "-"),
        (t("catalog.show.variant"), recipe.variant or "-"),
        (t("catalog.show.module"), recipe.module),
        (t("catalog.show.hf_model_id"), recipe.hf_model_id or "-"),
        (t("catalog.show.parallelism"), _layout_text(recipe)),
        (t("catalog.show.seq_length"), f"{recipe.seq_length} / {recipe.dataset_seq_length}"),
        (t("catalog.show.train_iters"), recipe.train_iters),
        (t("catalog.show.peft"), recipe.peft_scheme or "-"),
        (t("catalog.show.dataset"), _pairs(recipe.dataset)),
        (t("catalog.show.features"), _pairs(recipe.features)),
    ]
    for label, value in rows:
        print(f"{label}: {value}")
    print(f"{t('catalog.show.findings')}:")
    if not recipe.findings:
        print(f"  {t('catalog.show.no_findings')}")
    for finding in recipe.findings:
        # the severity in the reader's language ("[警告]", not "[warning]"); any other word as the catalog has it
        severity = (t(f"preflight.severity.{finding.severity}") if finding.severity in ("error", "warning", "info")
                    else finding.severity)
        print(f"  [{severity}] {finding.code}: {finding.text()}")
    return 0


def _catalog_json(catalog: Any) -> dict[str, Any]:
    """The catalog a listing came from: its file name and version, where it was found and its path."""
    return {"source": catalog.source, "version": catalog.version, "origin": catalog.origin,
            "path": str(catalog.path) if catalog.path is not None else None}


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "-"


def _diff(args: argparse.Namespace) -> int:
    """Exit 0: no difference; 1: differences; 2 (a UserError): a side is neither a version nor a catalog."""
    from mbridge_launch.base.output import print_json
    from mbridge_launch.catalog_sync.diff import diff_specs

    result = diff_specs(args.old, args.new)
    if args.format == "json":
        print_json(result.to_dict())
    else:
        for line in _diff_lines(result):
            print(line)
    return 1 if result.differs else 0


TOP_FIELDS = 8  # fields named in the text summary of a diff
VALUE_CHARS = 160  # a value longer than this (a pipeline layout) is cut in text; JSON has it whole


def _diff_lines(result: Any) -> list[str]:
    """The text form: every name and every changed field (a release's changes are read in full,
    or piped to a pager); values as JSON, the same in every language."""
    import json

    from mbridge_launch.base.escape import t_line
    from mbridge_launch.base.i18n import t

    def value(v: Any) -> str:
        text = json.dumps(v, ensure_ascii=False)
        return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 3] + "..."

    lines = [t_line("catalog.diff.header", old=result.old.version, old_source=result.old.source,
                    new=result.new.version, new_source=result.new.source)]
    for kind, d in result.kinds.items():
        lines.append(t_line("catalog.diff.kind", kind=t(f"catalog.diff.kind_name.{kind}"), old_count=d.old_count,
                            new_count=d.new_count, added=len(d.added), removed=len(d.removed), renamed=len(d.renamed),
                            aliases_added=len(d.aliases_added), aliases_removed=len(d.aliases_removed)))
        lines += [t_line("catalog.diff.added", name=n) for n in d.added]
        lines += [t_line("catalog.diff.removed", name=n) for n in d.removed]
        lines += [t_line("catalog.diff.renamed", old=o, new=n) for o, n in d.renamed]
        lines += [t_line("catalog.diff.alias_added", name=n) for n in d.aliases_added]
        lines += [t_line("catalog.diff.alias_removed", name=n) for n in d.aliases_removed]
    counts = result.field_counts()
    lines.append(t_line("catalog.diff.changed", recipes=len(result.changed), fields=sum(c for _, c in counts)))
    if counts:
        lines.append(t_line("catalog.diff.top_fields", fields=", ".join(f"{f} ({c})" for f, c in counts[:TOP_FIELDS])))
    for change in result.changed:
        if change.old_name != change.name:  # the kind as `catalog list` prints it: library | benchmark
            lines.append(t_line("catalog.diff.recipe_renamed", kind=t(f"card.kind_short.{change.kind}"), name=change.name,
                                old_name=change.old_name))
        else:
            lines.append(t_line("catalog.diff.recipe", kind=t(f"card.kind_short.{change.kind}"), name=change.name))
        lines += [t_line("catalog.diff.field", field=f.field, old=value(f.old), new=value(f.new)) for f in change.fields]
    if result.run_recipe:
        lines.append(t("catalog.diff.run_recipe"))
        lines += [t_line("catalog.diff.run_recipe_line", recipe=r.recipe, old=value(r.old), new=value(r.new))
                  for r in result.run_recipe]
    lines += [t_line("catalog.diff.catalog_field", field=f.field, old=value(f.old), new=value(f.new)) for f in result.catalog]
    lines += [t_line("catalog.diff.provenance", field=f.field, old=value(f.old), new=value(f.new))
              for f in result.provenance if f.field != "counts"]  # the counts are the lines above
    lines.append(t("catalog.diff.differs" if result.differs else "catalog.diff.same"))
    return lines
