"""Decoy: make /health a plain def so it "runs off the loop": its body does, but its request is still read by the blocked event loop.

FastAPI runs a def endpoint on a worker thread, yet everything before that
happens on the event loop: accepting the connection, reading and parsing the
request, routing it, and sending the answer. create_draft still calls the
model on the loop, so the probe's request sits unread until the model
answers, and the liveness probe fails exactly as before. (And the access log
is still blind, and /drafts is now called reviewed.)
"""
