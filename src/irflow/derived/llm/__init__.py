"""llm: any OpenAI-compatible chat endpoint, with every answer cached (client.py; cache.py,
messages.py, prompts.py)."""
