"""The process layer: starting, watching and stopping server processes and their trees, ports,
stray processes and the GPU-free check."""
