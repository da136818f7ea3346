"""What the test jobs print, a line at a time (imported from the job's own folder)."""

import sys


def say(line: str) -> None:
    """One line to stdout in one write: two ranks print at once, and print() writes the text
    and its newline separately when stdout is unbuffered (torchrun runs ``python -u``), so
    their lines could interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
