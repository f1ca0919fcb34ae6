"""``python -m dsh_code``: the ``dsh-code`` command."""

from host.cli import main

main()
