"""Variant: the reference endpoint (a plain def), and the access log as a pure ASGI middleware.

The middleware writes the arrival line when the request comes in, records the
status from the response's first message, and writes the completion line in a
finally, with 500 if the app raised before it started a response.
"""
