"""The kernel: what every layer may use and which imports none of our apps (errors, paths,
the tool registry and its context, the clock-job and prompt-section registries, the admin
bases, the secret scrubber). `tests/test_layers.py` keeps it that way."""
