# cudashim-trampoline: `cudashim run` puts this folder first on PYTHONPATH; Python imports this file
# before any user code. It runs cudashim's bootstrap, which then runs the next sitecustomize on sys.path.
try:
    from cudashim._bootstrap import bootstrap as _cudashim_bootstrap
except ModuleNotFoundError as _err:
    if _err.name != "cudashim":
        raise
    # cudashim not importable on its own (run from a checkout): use the package this file belongs to
    import os as _os
    import sys as _sys

    _root = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
    _sys.path.append(_root)
    try:
        from cudashim._bootstrap import bootstrap as _cudashim_bootstrap
    finally:
        _sys.path.remove(_root)
_cudashim_bootstrap()
