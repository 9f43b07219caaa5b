# cudashim-trampoline: `PYTHONPATH=<this repo> python app.py` runs cudashim's bootstrap before any
# user code; the bootstrap then runs the next sitecustomize on sys.path (a user's own is never shadowed).
from cudashim._bootstrap import bootstrap

bootstrap()
