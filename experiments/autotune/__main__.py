"""`python -m experiments.autotune`: the flags of `main`."""

import sys

from experiments.autotune.main import main

sys.exit(main())
