#!/usr/bin/env python3
"""Entry point of the stand-in trainer: `python tests/standin_trainer.py --recipe NAME ... KEY=VALUE`.

Runs tests/standin (this file's directory is sys.path[0] when run as a script). Pure stdlib.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from standin.train import main

    sys.exit(main(sys.argv[1:]))
