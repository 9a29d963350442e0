"""intellect.agents."""
