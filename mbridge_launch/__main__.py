import sys

from mbridge_launch.cli.main import main

sys.exit(main())
