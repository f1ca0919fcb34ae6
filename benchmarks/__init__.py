"""dsh-code's benchmark harness (issue 8): ``python -m benchmarks [--quick] [--out DIR] [--only ...]``.

Side by side in one run, with medians, p95 and max: start-up of a trivial program
(``_startup``), binding calls (``_calls``), compute against in-process CPython
(``_compute``), budget enforcement (``_budgets``), the heap cap (``_heap``), the output cap
(``_output``) and scale (``_scale``); pydantic-monty as a peer column where installed.
Writes ``results.md``, ``results.json`` and PNG plots (``_report``, ``_plots``).
"""
