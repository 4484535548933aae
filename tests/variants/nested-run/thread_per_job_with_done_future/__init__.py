"""Variant: a threading.Thread per job, which resolves a future on the API's loop when the job ends; drain() awaits those futures."""
