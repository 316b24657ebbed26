import sys

from mbridge_launch.cli import main

sys.exit(main())
