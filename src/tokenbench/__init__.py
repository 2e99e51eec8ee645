"""tokenbench: deploy LLM inference servers and benchmark them with the rigor of a published study."""

__version__ = "0.1.0"
