"""Write the ConfigContainer field tree of the installed Megatron Bridge (catalog_sync/config_fields.py)
in the tier's Python 3.12 env, with the tier's stand-ins (the TE shim first on sys.path, offline HF):

    ENV=$(bash tests/bridge/make-env.sh | tail -n1)
    $ENV/bin/python tests/bridge/build_recipe.py --all all --placeholder-inputs --out /tmp/all.jsonl
    $ENV/bin/python tests/bridge/extract_config_fields.py --builds /tmp/all.jsonl --out catalog/config-fields-0.6.2.json

(the maintainer route that regenerates the shipped file; test_config_fields.py checks it is current).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

if __name__ == "__main__":
    import hf_cache  # the tier's own module: stdlib only
    from build_recipe import setup_environment

    setup_environment(hf_cache.default_home())  # the shim on sys.path, offline, tier-private caches
    from mbridge_launch.catalog_sync.config_fields import main

    sys.exit(main(sys.argv[1:]))
