"""`python -m zkcoord` is the `zkcoord` command."""

import sys

from zkcoord.cli import main

sys.exit(main())
