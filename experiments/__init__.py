"""Experiments, each run as `python -m experiments.<name>` (`--help` lists its flags): `schedule_demo`,
`deepsched`, `list_schedulers`, `autotune`, `ternary_sweep`, `graphopt_rl`. A package `experiments/<name>/` holds
`configs.py` (presets `test`, `default`, `full`), the driver, its report, `main.py` (the flags) and `__main__.py`."""
