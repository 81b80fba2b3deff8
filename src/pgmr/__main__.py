"""`python -m pgmr`: the CLI without an installed entry point (e.g. from a source tree on PYTHONPATH)."""

from pgmr.cli.main import app

if __name__ == "__main__":
    app(prog_name="pgmr")
