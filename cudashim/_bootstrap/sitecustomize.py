# cudashim-trampoline: `cudashim run` puts this folder first on PYTHONPATH; Python imports this file
# before any user code. It runs cudashim's bootstrap, which then runs the next sitecustomize on sys.path.
import os as _os
import sys as _sys

__cudashim_trampoline__ = True  # what the bootstrap's sitecustomize chain checks first

# The cudashim this folder belongs to, not another copy that happens to be installed or on the path.
# Loaded from its own file (importlib's recipe for importing a source file directly), not by putting
# its parent folder on sys.path for a moment: that folder is often site-packages, whose listing alone
# (hundreds of entries) costs more than the whole package import, in every shimmed start-up.
if "cudashim" not in _sys.modules:
    from _frozen_importlib import module_from_spec as _module_from_spec  # importlib.util's, loaded already
    from _frozen_importlib_external import spec_from_file_location as _spec_from_file_location

    _pkg = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _spec = _spec_from_file_location("cudashim", _os.path.join(_pkg, "__init__.py"), submodule_search_locations=[_pkg])
    _sys.modules["cudashim"] = _module = _module_from_spec(_spec)
    try:
        _spec.loader.exec_module(_module)
    except BaseException:
        del _sys.modules["cudashim"]
        raise
from cudashim._bootstrap import bootstrap as _cudashim_bootstrap

_cudashim_bootstrap()
