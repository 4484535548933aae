"""Started by Python in a child of a guarded test run or program (this folder is put first on PYTHONPATH):
it guards the child too, then runs the sitecustomize this one stands in front of, if there is one."""
import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("LOOPKATA_GUARD_CHILD"):
    try:
        from loopkata.guard import child
    except ImportError:  # another interpreter, without loopkata: say so once, run unguarded
        sys.stderr.write(f"loopkata guard: {sys.executable} cannot import loopkata, so this process "
                         f"(pid {os.getpid()}) runs unguarded\n")
    else:
        child.start()

_here = os.path.dirname(os.path.abspath(__file__))
for _folder in sys.path:
    if os.path.abspath(_folder or ".") == _here:
        continue
    _spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [_folder])
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
        break
