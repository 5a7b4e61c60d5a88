"""Run independent inner problems: in this process, in local worker processes, or on Ray.

``--ray local`` starts a Ray cluster inside this process (2 CPUs, no
dashboard); ``--ray ADDRESS`` joins an existing one, so a lab with a
cluster learns on many machines with the same command.  Without Ray,
plain worker processes (``concurrent.futures``).  Every task is a pure
function of its arguments (its own warm start travels with it), so the
results do not depend on which runner or worker ran it.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os

from servoloop.locomotion.errors import RomInputError

__all__ = ["SerialRunner", "ProcessRunner", "RayRunner", "make_runner"]


class SerialRunner:
    """Each task in turn, in this process (tests, one core)."""

    workers = 1

    def map(self, fn, items):
        """``[fn(*item) for item in items]``, yielding (index, result) as they finish."""
        for i, item in enumerate(items):
            yield i, fn(*item)

    def close(self) -> None:
        pass


class ProcessRunner:
    """``workers`` forked processes; each builds its solvers once and keeps them."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))

    def map(self, fn, items):
        futures = {self._pool.submit(fn, *item): i for i, item in enumerate(items)}
        for fut in cf.as_completed(futures):
            yield futures[fut], fut.result()

    def close(self) -> None:
        self._pool.shutdown()


class RayRunner:
    """Ray tasks; ``address`` "local" starts a cluster in this process."""

    def __init__(self, address: str, num_cpus: int = 2) -> None:
        try:
            import ray
        except ImportError:
            raise RomInputError("--ray: Ray is not installed (pip install 'servoloop[rom]')") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            if address == "local":
                ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        self.workers = int(ray.cluster_resources().get("CPU", 1))
        self._remote = {}

    def map(self, fn, items):
        ray = self._ray
        remote = self._remote.setdefault(fn, ray.remote(fn))
        refs = {remote.remote(*item): i for i, item in enumerate(items)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield refs[done[0]], ray.get(done[0])

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def make_runner(ray_address: str | None = None, workers: int | None = None):
    """Ray when ``ray_address`` is given, else processes (serial for ``workers == 1``)."""
    if ray_address:
        return RayRunner(ray_address)
    if workers == 1:
        return SerialRunner()
    return ProcessRunner(workers)
