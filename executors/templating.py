"""Jinja2 rendering of the sbatch templates: StrictUndefined (a missing value is an error, not an
empty string) and one filter per quoting need, all backed by mbridge_launch.base.quoting.sh."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    from mbridge_launch.base.quoting import sh, sh_join
    from mbridge_launch.base.resources import sbatch_templates_dir

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(sbatch_templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sh"] = sh
    env.filters["shjoin"] = sh_join
    return env


def render_template(name: str, context: dict[str, Any]) -> str:
    return _environment().get_template(name).render(**context)
