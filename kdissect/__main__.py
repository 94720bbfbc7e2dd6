import sys

from kdissect.cli import main

sys.exit(main())
