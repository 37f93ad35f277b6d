"""Testing components: the pytest plugin and a local OpenAI-format server for LLM components."""
