"""FastMCP's own tests are run by test_fastmcp_suite.py in a pytest of their own, not here."""

from __future__ import annotations

collect_ignore_glob = ["upstream/*"]
