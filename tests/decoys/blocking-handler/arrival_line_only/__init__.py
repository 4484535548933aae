"""Decoy: write the access-log line on arrival instead of after call_next: a hung request shows, but nothing says whether any request finished.

With the endpoint a plain def, /health answers, and a request that hangs now
has its line. But the completion line is gone: every request looks the same,
finished or not, and its status and duration are nowhere. A request with an
arrival line and no completion line can only be told from one that finished
if finished requests write a second line.
"""
