"""Starting Ray for a run, and warming it up while the driver plans the stream.

A fresh local Ray takes 4-8 s to start, nearly all of it Ray's own processes (GCS, dashboard head, raylet,
agents); then Ray Data's first execution starts an actor of its own and reads a budget from it, and each new
worker process imports the project and its libraries on its first task. Everything here moves one of those
waits off the first case's path: ``start_ray`` starts Ray (and imports Ray Data) in a background thread while
the runner loads the cases; ``start_data_actors`` starts Ray Data's autoscaling coordinator and has each stream
start with the budget it reserved; ``prewarm`` has the workers import the CPU stages' modules (and Ray Data's)
as soon as Ray is up, while the driver imports Ray Data and plans the stream.
``ensure_ray`` is the one call everything else makes before it needs Ray.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from vbench_ray.pipeline import Stage

log = logging.getLogger(__name__)


_ray_start: dict[str, Any] = {}  # the background start in flight: {"done": Event, "error": exception or None}
_PARK = threading.Event()  # never set: the starting thread waits on it for good (start_ray)


def start_ray(cfg: Any, warm: Sequence[Stage] = ()) -> bool:
    """Begin starting (or connecting to) Ray in a background thread and return at once (True: begun; False: Ray
    is up or starting already); ``ensure_ray`` waits for it.

    A fresh local Ray takes seconds (docs/performance.md), nearly all of it waiting for Ray's own processes
    (GCS, dashboard head, raylet, agents). The runner calls this as soon as the config has passed its checks, so
    the driver loads the cases, builds the case table and plans the stream meanwhile instead of before.

    As soon as Ray is up, the same thread has the workers import the CPU stages of ``warm`` (``prewarm``): a
    worker's imports are the longest part of the first row's path, and they start here, before the driver's own
    import of Ray Data and the stream's planning, not after them.
    The same thread then imports Ray Data (``import_ray_data``), which the driver needs as soon as Ray is up: Ray's
    modules are imported by this one thread until ``ensure_ray`` returns, never by two threads at once.

    The thread stays parked after ``ray.init`` until the process exits: Ray starts its GCS and raylet with
    ``PR_SET_PDEATHSIG``, which Linux ties to the parent *thread*, so they would be killed when it ended."""
    import ray

    if ray.is_initialized() or _ray_start:
        return False
    _ray_start.update(done=threading.Event(), error=None)

    def work(box: dict) -> None:
        try:
            _init_ray(cfg)
        except BaseException as exc:  # noqa: BLE001  (handed to the main thread by ensure_ray)
            box["error"] = exc
        else:
            prewarm(warm)
            import_ray_data()
        box["done"].set()
        _PARK.wait()  # never set: see the docstring

    _quiet_sigterm_warning()
    threading.Thread(target=work, args=(_ray_start,), name="vbench-ray-start", daemon=True).start()
    return True


def ensure_ray(cfg: Any) -> None:
    """Connect to ``ray.address`` / ``RAY_ADDRESS`` (a cluster, or inside ``ray job submit``), else start locally;
    when ``start_ray`` began that already, wait for it (and raise what it raised)."""
    import ray

    error = settle_ray_start()
    if error is not None:
        raise error
    if not ray.is_initialized():
        _init_ray(cfg)


def settle_ray_start() -> BaseException | None:
    """Wait for a background start (if any) to end and forget it; return its exception. A run calls this before
    it ends, so it never exits while ``ray.init`` is half done."""
    if not _ray_start:
        return None
    _ray_start["done"].wait()
    error = _ray_start["error"]
    _ray_start.clear()
    if error is None and threading.current_thread() is threading.main_thread():
        # ray.init installs this only from the main thread: the same handler (exit, so atexit shuts Ray down)
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
    return error


def import_ray_data() -> None:
    """Import ``ray.data`` ahead of the main thread's first use (it takes up to seconds; here it overlaps Ray's start).

    Only from the thread that ran ``ray.init`` and before ``ensure_ray`` returns: the main thread imports nothing of
    Ray meanwhile. Two threads importing overlapping packages can each be handed the other's half-made module
    (Python breaks the lock cycle that way), and the import then fails part-way. That happened in CI (2026-11-27,
    a job's driver, when this import ran in a thread of its own beside ``ray.init``): the failure was swallowed,
    the half-imported submodules stayed in ``sys.modules``, and the main thread's later ``import ray.data`` made a
    new ``ray.data`` to which they were never bound (``module 'ray.data' has no attribute '_internal'`` mid-run).
    So a failure here also takes the modules it added out of ``sys.modules``: the main thread's own import then
    starts clean, and raises there if the failure is real."""
    import importlib

    before = set(sys.modules)
    try:
        importlib.import_module("ray.data")
    except Exception as exc:  # noqa: BLE001  (the main thread imports it again, from scratch, and raises)
        for name in [m for m in sys.modules if m not in before and m.split(".")[0] == "ray"]:
            del sys.modules[name]
        log.debug("importing ray.data beside ray.init failed (the main thread imports it again): %r", exc)


def _init_ray(cfg: Any) -> None:
    import os

    import ray

    address = cfg.ray.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        # Logical CPUs: at least 4, so a stage's actors never starve the tasks feeding them (docs/stack.md)
        num_cpus = cfg.ray.num_cpus or max(4, os.cpu_count() or 1)
        # address="local": a fresh runtime, never silently attaching to a cluster someone else started
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=True,
            _node_ip_address="127.0.0.1",
        )


def _quiet_sigterm_warning() -> None:
    """Ray warns that it set no SIGTERM handler when ``ray.init`` runs outside the main thread;
    ``settle_ray_start`` sets it from the main thread, so the warning would only confuse."""
    worker_log = logging.getLogger("ray._private.worker")
    if not any(getattr(f, "vbench_sigterm", False) for f in worker_log.filters):

        class _Filter(logging.Filter):
            vbench_sigterm = True

            def filter(self, record: logging.LogRecord) -> bool:
                return "SIGTERM handler is not set" not in record.getMessage()

        worker_log.addFilter(_Filter())


def start_data_actors() -> None:
    """Start Ray Data's autoscaling coordinator now, while the driver plans the stream, not when it starts.

    Ray Data (2.60) budgets a run by what this actor reserves for it, and reads the reservation at most once a
    second: until the actor has started (a new worker process: seconds on a busy machine) and answered, the stream
    runs only the one task Ray Data's liveness rule lets through, and an actor started with the stream put its
    own start on the first case's path. The actor is named and detached; the stream finds this one. Ray Data
    internals: if they move, the stream simply starts it itself, as before.

    One call to it now, answered whenever it is up (nothing waits for it): a process's first call to the actor
    took 0.09-0.14 s (reaching it) and its first reservation 0.04-0.07 s (its first request to the Ray
    autoscaler), 2-4 ms each after that. ``recompute=True`` runs the actor's periodic tick (re-send the merged
    requests, re-read the nodes) once more, early; reading for a requester that has no request reserves
    nothing. Then ``_read_budget_before_stream_starts``."""
    try:
        from ray.data._internal.cluster_autoscaler import get_or_create_autoscaling_coordinator
    except ImportError:
        return
    try:
        coordinator = get_or_create_autoscaling_coordinator()
        coordinator.get_reserved_resources.remote("vbench-warm-up", recompute=True)
    except Exception as exc:  # noqa: BLE001  (an optimisation only)
        log.debug("could not start Ray Data's autoscaling coordinator early: %s", exc)
    _read_budget_before_stream_starts()


FIRST_BUDGET_WAIT_S = 0.25  # at most this long for the coordinator's first answer before the stream starts


def _read_budget_before_stream_starts() -> None:
    """Have each stream start with the budget the coordinator reserved for it, not with none for its first second.

    Ray Data (2.60) reads a run's budget through a non-blocking client (``DefaultAutoscalingCoordinator.
    get_reserved_resources``: it returns the last answer and sends the next read) and its resource manager keeps
    what it read for a second (``ResourceManager.get_global_limits``, ``GLOBAL_LIMITS_UPDATE_INTERVAL_S``). The
    executor's first read therefore returns an empty reservation and the run's limits stay zero until its second
    read ~1 s later: only the one task Ray Data's liveness rule lets through runs meanwhile.
    An execution callback (``DataContext.custom_execution_callback_classes``), called in the driver's thread once
    the executor has registered with the coordinator and before its loop's thread starts, sends that first read
    and waits for the answer (at most
    ``FIRST_BUDGET_WAIT_S``), so the loop's first read finds it: the same budget, a second earlier (measured in
    docs/performance.md); the first task starts as before. Ray Data
    internals (the executor's autoscaler, its client's pending read): if they move, the callback does nothing
    and the stream starts as before. The budget only changes which pool's actors Ray places first: pools whose
    starting actors do not fit the cluster together wait for each other whatever it is, which is why
    ``vbench_ray.pool_plan`` plans them to fit."""
    try:
        from ray.data import DataContext
        from ray.data._internal.execution.execution_callback import ExecutionCallback
    except ImportError:
        return

    class _FirstBudgetRead(ExecutionCallback):
        vbench_first_budget = True

        def before_execution_starts(self, executor) -> None:
            _first_budget_read(executor)

    try:
        classes = DataContext.get_current().custom_execution_callback_classes
        if not any(getattr(c, "vbench_first_budget", False) for c in classes):
            classes.append(_FirstBudgetRead)
    except Exception as exc:  # noqa: BLE001  (an optimisation only)
        log.debug("could not register the first budget read: %s", exc)


def _first_budget_read(executor, wait_s: float = FIRST_BUDGET_WAIT_S) -> None:
    """Send the executor's first budget read and wait (at most ``wait_s``) for the answer to reach its cache."""
    import ray

    try:
        autoscaler = executor._cluster_autoscaler
        client = autoscaler._autoscaling_coordinator
        began = time.monotonic()
        autoscaler.get_total_resources()  # sends the read: answered after the executor's registration (FIFO)
        pending = client._pending_reserved_resources
        if pending is None:
            return
        ready, _ = ray.wait([pending], timeout=wait_s)
        if ready:
            budget = autoscaler.get_total_resources()  # takes the answer into the cache the loop reads
            log.debug("first Ray Data budget read in %.3f s: %s", time.monotonic() - began, budget)
        else:
            log.debug("no Ray Data budget within %.2f s: the stream starts without it", wait_s)
    except Exception as exc:  # noqa: BLE001  (an optimisation only)
        log.debug("could not read Ray Data's first budget early: %s", exc)


_WARMED: set[str] = set()  # tokens of the stages whose workers were asked to import their modules (prewarm)
RAY_DATA_TASK_MODULES = ("ray.data",)  # what a worker imports to run its first Ray Data map task (its package)


def prewarm(stages: Sequence[Stage], capacity: dict[str, float] | None = None) -> list:
    """Have the worker processes import the CPU stages' modules now, while the driver plans the stream.

    A fresh worker pays for importing the project and its libraries (OpenCV, SciPy, scikit-image: 1-3 s)
    on its first task: the stage's module, what its class declares in ``warm_modules(init_kwargs)`` (the
    decode stage: its metrics' ``imports`` and the video reader), and Ray Data itself (its map task's module
    imports the ``ray.data`` package, pandas included: 0.8-1.1 s on a cloud VM); Ray reuses the same processes
    for Ray Data's tasks, so doing it here overlaps that cost with the driver's import of Ray Data and the
    dataset's planning and start instead of adding it before the first row. One task per CPU of ``capacity``
    (default: the cluster's). A stage is warmed once per process (``start_ray`` warms it as soon as Ray is up;
    the runner's later call does nothing more). Fire and forget: nothing waits for these tasks (their refs are
    returned), and a failure only means the stream's first task imports the module."""
    import ray

    todo = [s for s in stages if s.kind == "cpu" and getattr(s.fn, "__module__", None) and s.token not in _WARMED]
    try:  # never raises: it runs in the thread that starts Ray, whose end ensure_ray waits for
        modules: list[str] = []
        for stage in todo:
            declared = getattr(stage.fn, "warm_modules", None)  # e.g. the decode stage's metric libraries
            modules += [stage.fn.__module__] + (list(declared(stage.init_kwargs)) if declared else [])
        modules = list(dict.fromkeys(modules + list(RAY_DATA_TASK_MODULES) if modules else []))
        if not modules:
            return []
        cpus = capacity["CPU"] if capacity is not None else ray.cluster_resources().get("CPU", 1.0)
        warm = ray.remote(num_cpus=1, max_retries=0)(_import_modules)
        refs = [warm.remote(modules) for _ in range(max(1, min(int(cpus), 256)))]
    except Exception as exc:  # noqa: BLE001  (an optimisation only: the stream's first tasks import them)
        log.debug("could not start the workers' imports early: %s", exc)
        return []
    _WARMED.update(s.token for s in todo)
    return refs


def _import_modules(modules: list[str]) -> tuple[int, list[str]]:
    """Import ``modules`` here (``module:attribute`` also reads the attribute: a lazily loading package then
    imports its module; one that is missing is skipped: the stage reports it on its own); return this process's
    pid and which of them it now holds."""
    import importlib
    import os

    held = []
    for name in modules:
        module, _, attribute = name.partition(":")
        try:
            loaded = importlib.import_module(module)
            if attribute:
                getattr(loaded, attribute)
        except (ImportError, AttributeError):
            continue
        held.append(name)
    return os.getpid(), held
