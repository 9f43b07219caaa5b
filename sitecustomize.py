# cudashim-trampoline: `PYTHONPATH=<this repo> python app.py` runs cudashim's bootstrap before any
# user code; the bootstrap then runs the next sitecustomize on sys.path (a user's own is never shadowed).
__cudashim_trampoline__ = True  # what the bootstrap's sitecustomize chain checks first

from cudashim._bootstrap import bootstrap

bootstrap()
