"""Decoy: an arrival line before call_next and a completion line after it, with no try/finally: a handler that raises leaves its request in flight for ever.

When the handler raises, `await call_next(request)` raises the same exception
(the server answers 500 further out), so the line after it is never written.
The log then shows an arrival line and no completion line for a request that
finished long ago with a 500: exactly the pattern that was meant to mean
"still hanging".
"""
