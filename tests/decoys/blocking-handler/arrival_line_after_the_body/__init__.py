"""Decoy: the arrival line names the size of the request's body, so the middleware reads the body first: a request whose upload stalls has no line at all.

With the endpoint a plain def and a completion line in a finally, every
request that gets as far as its handler is in the log. But `await
request.body()` waits until the client has sent the whole body. A client that
sends its headers and then stalls on the upload (a phone losing its signal, a
proxy holding the request) has arrived, yet it has no line while it stalls,
and when it gives up and disconnects, the read raises before either line is
written: no arrival, no completion, exactly like a request that never came.
The arrival line must be written from what arrives first, the request line
and the headers, before anything waits for the body.
"""
