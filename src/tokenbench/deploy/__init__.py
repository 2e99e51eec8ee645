"""Server lifecycle: profiles, engine adapters, local processes, readiness, server facts."""

from tokenbench.deploy.engines import facts_for

__all__ = ["facts_for"]
