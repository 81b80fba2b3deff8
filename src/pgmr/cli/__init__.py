"""The `pgmr` command line."""
