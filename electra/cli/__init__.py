"""The `electra` command line."""
