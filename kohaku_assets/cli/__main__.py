"""`python -m kohaku_assets.cli ...`: the `kohaku` command."""

import sys

from kohaku_assets.cli import main

sys.exit(main())
