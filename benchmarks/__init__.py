"""dsh-code's benchmark harness (issues 8 and 15): ``python -m benchmarks [--quick] [--out DIR] [--only ...]``.

What users get, side by side with pydantic-monty in one run (p50, p95, max, n, failed runs
apart): trivial runs back to back and after a pause (``_startup``), binding calls in both
call styles through code mode and raw (``_calls``), compute against in-process CPython
(``_compute``), budget enforcement (``_budgets``, ``_overshoot``), preloaded libraries
(``_preload``), sessions (``_sessions``), busy neighbours (``_load``), the heap cap
(``_heap``), the output cap (``_output``), floods aimed at the host (``_flood``) and scale
(``_scale``); issue 15's targets checked. Writes ``results.md``, ``results.json`` and PNG
plots (``_report``, ``_plots``); ``readme_table.py`` renders the README's table from a full
run's ``results.json``.
"""
