"""placement stage."""
