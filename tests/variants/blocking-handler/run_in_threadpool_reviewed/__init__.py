"""Variant: create_draft stays an async def and awaits Starlette's run_in_threadpool(model.complete, ...).

The blocking call runs on a thread of the same threadpool a plain def endpoint
gets (AnyIO's, 40 threads by default), and the coroutine only awaits it, so
the event loop stays free; someone checked that, and put /drafts on
app.REVIEWED_ASYNC. With every thread held, the next request waits for one
inside its endpoint, after the middleware has written its arrival line. The
access log is the reference's.
"""
