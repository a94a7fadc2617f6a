"""`python -m experiments.deepsched`: the flags of `main`."""

from experiments.deepsched.main import main

main()
