"""The `albert` command line."""
