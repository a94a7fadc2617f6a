"""`python -m experiments.ternary_sweep`: the flags of `main`."""

from experiments.ternary_sweep.main import main

main()
