"""board stage."""
