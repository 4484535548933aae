"""Decoy: the right wrapper, plus a keepalive gap that doubles while a step stays quiet (reset after each section): the gaps grow without bound, past the load balancer's timer.

Every section arrives, each step runs once and the cleanup is right. But the
wait before each keepalive doubles while one step stays quiet: 25 s, 50 s,
100 s, 200 s, 400 s. A step of ten minutes meets a silence of 400 s, and the
load balancer cuts the connection after 350 s. Scaled down (a 0.04 s
interval), a quiet step of 0.8 s gets 4 keepalives instead of 20, and a
silence of 0.32 s.
"""
