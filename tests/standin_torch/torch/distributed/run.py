"""Stand-in for `python -m torch.distributed.run` on one node (see ../../README.md): start
--nproc_per_node copies of the script with torchrun's environment, forward signals, and exit with
the first non-zero exit status of a worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

USAGE = "usage: python -m torch.distributed.run [--standalone] --nproc_per_node=N SCRIPT [ARGS...]"
_FLAGS_WITH_VALUE = {"--nproc_per_node", "--nproc-per-node", "--nnodes", "--master_addr", "--master-addr",
                     "--master_port", "--master-port", "--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint",
                     "--rdzv-endpoint", "--rdzv_id", "--rdzv-id", "--node_rank", "--node-rank"}


def parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(launcher options, [script, *script args]); options end at the first non-option word."""
    options: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        name, eq, value = argv[i].partition("=")
        if not eq and name in _FLAGS_WITH_VALUE:
            if i + 1 >= len(argv):
                raise SystemExit(USAGE)
            value, i = argv[i + 1], i + 1
        options[name.replace("-", "_").lstrip("_")] = value if (eq or name in _FLAGS_WITH_VALUE) else "1"
        i += 1
    if i >= len(argv):
        raise SystemExit(USAGE)
    return options, argv[i:]


def main(argv: list[str]) -> int:
    options, command = parse(argv)
    nproc = int(options.get("nproc_per_node", "1"))
    if int(options.get("nnodes", "1")) != 1:
        raise SystemExit("this stand-in runs one node only")
    base = dict(os.environ, WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK="0",
                MASTER_ADDR=options.get("master_addr", "127.0.0.1"), MASTER_PORT=options.get("master_port", "29500"))
    workers = [subprocess.Popen([sys.executable, *command], env=dict(base, RANK=str(r), LOCAL_RANK=str(r)))
               for r in range(nproc)]

    def forward(signum, _frame):  # noqa: ANN001
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
        signal.signal(signum, forward)
    codes = [worker.wait() for worker in workers]
    return next((code for code in codes if code), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
