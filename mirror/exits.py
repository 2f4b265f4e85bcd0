"""Exit codes of kmirror's commands, the same for every command."""

EXIT_FAILED = 1
"""The work failed (a corrupt source batch, data loss, a broker that refused a write)."""
EXIT_UNUSABLE = 2
"""Bad configuration, refused credentials or an unreachable cluster: nothing was attempted."""
