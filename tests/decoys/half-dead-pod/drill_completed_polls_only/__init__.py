"""Decoy: judge only the /health polls that came back, once the slow request has returned.

A worker frozen for good answers neither the slow request nor the polls
waiting behind it, so this drill never speaks. And when the freeze does end,
the slow request's answer and the polls' answers come back together: the drill
stops on the first and may never see the others, which are the only waits past
the limit. A poll still waiting past the limit has waited past the limit: the
drill must count it, and say fail without waiting for the slow request.
"""
