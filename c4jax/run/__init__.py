"""The machinery of a running command: run directories, logs, the host loop, interruption,
several processes, XLA's CPU flags, command-line helpers."""
