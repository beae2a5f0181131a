"""`python -m bertscope` runs the command line."""

from .cli import main

main()
