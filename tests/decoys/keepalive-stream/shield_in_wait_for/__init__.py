"""Decoy: keep the step in a task and wait_for(asyncio.shield(task)), so the timeout cannot cancel it: when the client leaves, nothing stops that task either.

The shield does its job: a timeout cancels only the shield, the step runs on,
every section arrives with keepalives between. But when the client goes away,
Starlette cancels the response and the wrapper with it, and the shield keeps
the step running too: it runs to its end (a model call nobody will read), and
the generator is closed (its finally runs) only after that.
"""
