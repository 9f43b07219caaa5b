"""Plain-torch kernels: the numerical oracle for the TileLang backends and the CPU implementation.

Every kernel is vectorised over tokens (no Python loop over rows), so CPU inference stays usable.
"""
