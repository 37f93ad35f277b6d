"""Testing components and changes: the pytest plugin, a local OpenAI-format server for LLM components, what a change touches and its preview."""
