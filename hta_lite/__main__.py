import sys

from .views.cli import main

sys.exit(main())
