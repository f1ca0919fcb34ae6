"""dsh-code's host side: tools, the sandbox backend, code mode and the CLI.

Kept empty on purpose: importing one subpackage must not load the others.
"""
