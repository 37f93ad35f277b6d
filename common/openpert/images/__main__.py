"""``python -m openpert.images``: the ``openpert images`` subcommands without the main command line."""

import sys

from openpert.images.commands import main

sys.exit(main())
