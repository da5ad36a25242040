"""The `stapel` command line: submit .txt files, watch progress, fetch results."""
