# cudashim-trampoline: `cudashim run` puts this folder first on PYTHONPATH; Python imports this file
# before any user code. It runs cudashim's bootstrap, which then runs the next sitecustomize on sys.path.
import os as _os
import sys as _sys

# the cudashim this folder belongs to, not another copy that happens to be installed or on the path
_root = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
_sys.path.insert(0, _root)
try:
    from cudashim._bootstrap import bootstrap as _cudashim_bootstrap
finally:
    _sys.path.remove(_root)
_cudashim_bootstrap()
