import json
import subprocess
import sys


def test_versions_json_lists_catalog_and_libraries_without_importing_them():
    code = ("import sys, io, contextlib, json; from mbridge_launch.cli.main import main; buf = io.StringIO();\n"
            "with contextlib.redirect_stdout(buf): rc = main(['versions', '--format', 'json'])\n"
            "print(json.dumps({'rc': rc, 'out': json.loads(buf.getvalue()), "
            "'imported': [m for m in ('nemo_run', 'submitit') if m in sys.modules]}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["rc"] == 0 and result["imported"] == []
    info = result["out"]
    assert "0.6.2" in info["megatron_bridge_catalogs"]
    assert info["libraries"]["nemo_run"] and info["libraries"]["submitit"]
    assert set(info["gpu_types"]) >= {"h100", "h200", "b200", "b300", "gb200", "gb300"}
