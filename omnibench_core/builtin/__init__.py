"""The built-in plugins: the targets (`local`, `sglang-omni`), the scorers, and the `selftest`
workload. Registered through entry points like any third-party plugin."""
