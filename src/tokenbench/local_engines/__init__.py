"""Engines and models this machine runs itself: set-up of the vLLM and SGLang CPU venvs (resumable, stamped
steps), bundled models, and the launcher shims profiles start (`python -m tokenbench.local_engines.vllm_cpu serve`)."""
