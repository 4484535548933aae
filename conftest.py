"""The whole suite (tests and nbval notebooks) keeps its progress apart from the learner's."""
import os
import tempfile

os.environ["LOOPKATA_STATE"] = tempfile.mkdtemp(prefix="loopkata-suite-")
