"""Decoy: a producer task feeds an asyncio.Queue and the stream does wait_for(queue.get()), but nothing stops the producer: after the client leaves it keeps running steps.

Cancelling queue.get() at a timeout loses nothing, so every section arrives
with keepalives between. But the producer is a task of its own: when the
client goes away, the response is cancelled and the producer is not. It goes
on running steps (model calls) for a reader that is gone, until the draft is
done.
"""
