"""The plugin hooks: their contract (``specs``, shared by every layer) and the manager that loads
plugins once per process and calls them (``manager``, the front door)."""
