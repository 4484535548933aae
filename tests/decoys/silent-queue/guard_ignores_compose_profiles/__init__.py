"""Decoy: a guard that counts every compose service's worker, those behind `profiles` too.

A service with profiles starts only once one of them is enabled (`docker
compose --profile schema up`, or COMPOSE_PROFILES); a plain `docker compose
up` leaves it out. This guard counts its queues as consumed, so it approves
the compose file whose schema worker never starts.
"""
