"""`python -m lmgym <command> ...`: the same as the installed `lmgym` command (lmgym/commands)."""
import sys

from lmgym.commands import main

if __name__ == "__main__":
    sys.exit(main())
