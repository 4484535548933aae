"""Decoy: the shell traps SIGTERM, forwards it to the service and waits for it, once.

The trap interrupts `wait`, which then returns 143 (128 + SIGTERM) at once, and with `set -e`
the script ends there: PID 1 exits while the service is still stopping, the kernel kills the
rest of the namespace, and the container reports 143 though no signal killed it.
"""
