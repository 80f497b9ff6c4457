"""observation."""
