"""The whole suite (tests and nbval notebooks) keeps its progress apart from the learner's."""
import atexit
import os
import shutil
import tempfile

os.environ["LOOPKATA_STATE"] = tempfile.mkdtemp(prefix="loopkata-suite-")
atexit.register(shutil.rmtree, os.environ["LOOPKATA_STATE"], ignore_errors=True)
