import sys

from rocketha.cli import main

sys.exit(main())
