"""`python -m stapel_cli` (installed as `stapel`)."""

import sys

from stapel_cli.main import main

sys.exit(main())
