"""Child-process helpers, public: a free local port, waiting for a condition with a deadline, stopping a
process group politely then firmly (what the devnet, the js-ipfs test daemon, the benches and the tests start
their children with; the implementation is `_procs`)."""

from intellect.sdk._procs import free_port, stop_process, wait_until

__all__ = ["free_port", "stop_process", "wait_until"]
