"""`python -m experiments.list_schedulers`: the flags of `main`."""

from experiments.list_schedulers.main import main

main()
