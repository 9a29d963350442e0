"""intellect.verifier."""
