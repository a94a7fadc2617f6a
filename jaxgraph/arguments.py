"""The argument checks of `jaxsched.common.arguments`, under the name `jaxgraph.jax_env` imports them by."""

from jaxsched.common.arguments import integer, number

__all__ = ["integer", "number"]
