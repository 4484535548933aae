"""Decoy: in docker-compose.yml, a worker of its own for the schema queue, behind `profiles: ["schema"]`.

A service with profiles is started only once one of them is enabled
(`docker compose --profile schema up`, or COMPOSE_PROFILES). A plain
`docker compose up` leaves it out, so nothing consumes the schema queue: every
schema sync is accepted and stays PENDING, the failure the fix was for.
"""
