"""``python -m host.cli``: the dsh-code command."""

from host.cli import main

main()
