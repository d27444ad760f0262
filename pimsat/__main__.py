"""`python -m pimsat ...` is the `pimsat` command (handy under cProfile or a foreign PYTHONPATH)."""

from pimsat.cli import main

main(prog_name="pimsat")
