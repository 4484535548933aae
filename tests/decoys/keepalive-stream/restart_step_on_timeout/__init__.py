"""Decoy: keep wait_for, and after a timeout resume the generator at the step it cut off with no deadline: every slow step runs twice, and the stream is silent while it reruns.

The on-call fix. wait_for closed the generator, so after the keepalive the
wrapper opens it again from the last event id sent (the resume path browsers
use) and waits for that step with no timeout. Every section arrives, but each
slow step runs twice: the first run was cancelled at the keepalive, the second
starts from scratch (a second model call, billed twice). And after the one
keepalive, the stream is silent for the whole of the restarted step.
"""
