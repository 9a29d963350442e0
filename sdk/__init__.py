"""intellect.sdk."""
