"""``python -m swell`` runs the CLI."""

import sys

from swell.cli import main

sys.exit(main())
