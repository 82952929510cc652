"""History across commits: every complete campaign indexed in one SQLite store, the series per
metric in first-parent order, its change points, and what reads them (``invoke history``,
``invoke publish``, pull-request summaries)."""
