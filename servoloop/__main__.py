"""``python -m servoloop`` is the ``servoloop`` command."""

import sys

from servoloop.cli import main

sys.exit(main())
