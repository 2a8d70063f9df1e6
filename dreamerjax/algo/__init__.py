"""The algorithm: numerics, networks, the agent's losses and update, the optimiser, the
return normaliser and lambda returns.

Pure JAX functions over explicit state, no I/O; imports only config/.
"""
