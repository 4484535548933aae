"""Decoy: reach every worker first, then probe /health the way the kubelet does, on a new connection each time.

The drill maps connections to workers and says void when it cannot reach one,
but while the slow request runs it probes on new connections. A new connection
goes to whichever worker accepts it first, and a frozen worker accepts nothing:
every probe lands on the healthy worker and answers at once. In control mode
the drill says pass on a pod whose other worker is frozen, exactly what the
kubelet saw. Only connections pinned before the freeze can reach the frozen
worker.
"""
