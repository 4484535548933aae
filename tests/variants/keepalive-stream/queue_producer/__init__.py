"""Variant: a producer task reads the generator into a one-slot asyncio.Queue, the stream waits on queue.get() with wait_for, and a finally cancels the producer and closes the generator.

A timeout cancels only the queue.get(), which loses nothing: the item stays
in the queue and the producer's step runs on. The producer passes the
generator's end, or its error, through the queue. Whatever ends the stream
(the last section, an error, a client that left), the finally stops the
producer, waits for it to unwind, and closes the generator.
"""
