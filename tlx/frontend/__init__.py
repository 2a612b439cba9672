"""The backend-neutral frontend: @tlx.jit, task splitting, argument binding, caching."""
