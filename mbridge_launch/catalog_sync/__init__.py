"""Build the recipe catalog from a Megatron Bridge wheel or source tree, statically.

    sync.py      sync(), build_catalog(), render_catalog(): the whole run, wheel to JSON file

    source.py    read the wheel (zipfile) or tree; version from METADATA / package_info.py
    interp.py    the static interpreter (with expressions.py, statements.py, frames.py,
                 objects.py, builtins_table.py, values.py, mcore_defaults.py)
    exports.py   exported library / benchmark recipe names, canonical vs legacy alias
    names.py     <model>_<task>_<N>gpu_<hw>_<precision>[_<variant>]_config
    extract.py   ConfigContainer -> catalog record (Megatron field names)
    findings.py  rule checks recorded on each recipe
    writer.py    deterministic JSON
"""
