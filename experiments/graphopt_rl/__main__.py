"""`python -m experiments.graphopt_rl`: the flags of `main`."""

import sys

from experiments.graphopt_rl.main import main

sys.exit(main())
