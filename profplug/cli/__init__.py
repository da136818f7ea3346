"""The command line: thin commands (one module each) over the library."""
