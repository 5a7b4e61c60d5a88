"""controller subcommands: run, status, stop, log (filled in by the daemon work)."""

__all__ = ["register"]


def register(sub) -> None:
    return None
