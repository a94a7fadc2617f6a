"""jaxquant."""
