"""Log analysis: what an engine's log says it ran (FlagGems operator replacement)."""
