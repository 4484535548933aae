"""The facilitator's room: learners' exports read, the table and the figure, re-grading in a sandbox,
the time each kata takes (effort) and the one link a room hands out (workshop).
"""
