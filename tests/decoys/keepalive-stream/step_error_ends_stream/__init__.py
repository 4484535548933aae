"""Decoy: a step that raises ends the stream as if the draft were complete: the wrapper catches the exception with StopAsyncIteration, and nothing is logged.

Keepalives, steps and cleanup are right. But `except Exception: return`
turns a failed model call into a clean end of the response: the browser
reads an end of stream, takes the draft for complete with sections missing,
and the server's log says nothing about the error or where it came from.
An exception must leave the wrapper: the server logs it with its traceback,
and the response is cut, so that the client knows it is incomplete.
"""
