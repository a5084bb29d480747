"""Starting Ray for a run, and warming it up while the driver plans the stream.

A fresh local Ray takes 4-8 s to start, nearly all of it Ray's own processes (GCS, dashboard head, raylet,
agents); then Ray Data's first execution starts an actor of its own and reads a budget from it, and each new
worker process imports the project and its libraries on its first task. Everything here moves one of those
waits off the first case's path: ``start_ray`` starts Ray (and imports Ray Data) in a background thread while
the runner loads the cases; ``start_data_actors`` starts Ray Data's autoscaling coordinator and has each stream
start with the budget it reserved; ``prewarm`` has the workers import the CPU stages' modules (and Ray Data's)
as soon as Ray is up, while the driver imports Ray Data and plans the stream.
``start_ray_early`` begins Ray's start as a command's very first step, before the driver imports the project and
loads its config, and has the workers import what every stream needs (``prewarm_common``) as soon as Ray is up; the
run takes it over (``start_ray``) once its config has passed its checks.
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


_ray_start: dict[str, Any] = {}  # the background start in flight (``_begin``): its events, settings and outcome
_PARK = threading.Event()  # never set: the starting thread waits on it for good (start_ray)


def start_ray_early(address: str | None, num_cpus: int | None) -> bool:
    """The command's first step (``vbench-ray run``, the job scripts): begin starting (or connecting to) Ray with
    the settings the command line and the YAML give (``ray.address``, ``ray.num_cpus``), before the driver
    imports the project, loads and checks the config and plans the run; return True when begun.

    Ray's start and the workers' common imports (``prewarm_common``): nothing of the run's own runs on its
    workers until the run, its config checked (``preflight``, the data's checks) and its plan built, hands over
    with ``start_ray`` (or ``ensure_ray``), which also checks that the config asks Ray for the same (else this
    start is shut down and Ray starts again as the config says).
    A command that stops before that (a config error) ends this start with ``end_unused_start``: the local Ray
    it started is shut down, never left behind. Ray is imported by the starting thread only: the driver's own
    first import of Ray waits for it (``ray_imported``)."""
    ray = sys.modules.get("ray")
    if _ray_start or (ray is not None and ray.is_initialized()):
        return False
    _begin(_RayCfg(address, num_cpus), warm=None)
    return True


def quick_ray_settings(config: str, overrides: list[str]) -> tuple[str | None, int | None] | None:
    """``(ray.address, ray.num_cpus)`` as the overrides, else the YAML's own ``ray`` section, give them (null when
    neither does): a quick read, before the config is loaded; the run compares them with the loaded config and
    starts Ray again if they differ (a ``ray`` section in a file the YAML ``extends``). None when there is nothing
    quick to read (an included ``ray`` section, a YAML that does not parse, a value of the wrong type): no early
    start; the config's own load reports what is wrong."""
    from pathlib import Path

    import yaml

    try:
        node = yaml.safe_load(Path(config).read_text())
    except Exception:  # noqa: BLE001  (load_config says what is wrong with it)
        return None
    section = node.get("ray") if isinstance(node, dict) else None
    got = dict(section) if isinstance(section, dict) else {}
    for item in overrides:
        key, _, value = item.partition("=")
        if key in ("ray.address", "ray.num_cpus"):
            try:
                got[key[len("ray.") :]] = yaml.safe_load(value) if value else None
            except yaml.YAMLError:
                return None
        elif key == "ray" or key.startswith("ray.include"):
            got["include"] = value
    address, num_cpus = got.get("address"), got.get("num_cpus")
    if "include" in got or not isinstance(address, (str, type(None))) or "${" in str(address):
        return None
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1):
        return None
    return address or None, num_cpus


class _RayCfg:
    """The ``ray`` section's start settings as a config node, for ``_init_ray`` / ``ray_settings``."""

    def __init__(self, address: str | None, num_cpus: int | None):
        self.ray = self
        self.address, self.num_cpus = address, num_cpus


def ray_settings(cfg: Any) -> tuple[str | None, int | None]:
    """What ``ray.init`` is called with for ``cfg``: the address to attach to, else the local runtime's CPUs
    (at least 4, so a stage's actors never starve the tasks feeding them: docs/stack.md)."""
    import os

    address = cfg.ray.address or os.environ.get("RAY_ADDRESS") or None
    if address:
        return address, None
    return None, cfg.ray.num_cpus or max(4, os.cpu_count() or 1)


def start_ray(cfg: Any, warm: Sequence[Stage] = ()) -> bool:
    """Begin starting (or connecting to) Ray in a background thread and return at once (True: begun, or the
    command's early start taken over; False: Ray is up or starting already); ``ensure_ray`` waits for it.

    A fresh local Ray takes seconds (docs/performance.md), nearly all of it waiting for Ray's own processes
    (GCS, dashboard head, raylet, agents). The runner calls this as soon as the config has passed its checks, so
    the driver loads the cases, builds the case table and plans the stream meanwhile instead of before; when the
    command began Ray's start already (``start_ray_early``) and the config asks for the same, this hands it the
    stages to warm.

    As soon as Ray is up, the same thread has the workers import the CPU stages of ``warm`` (``prewarm``): a
    worker's imports are the longest part of the first row's path, and they start here, before the driver's own
    import of Ray Data and the stream's planning, not after them.
    The same thread then imports Ray Data (``import_ray_data``), which the driver needs as soon as Ray is up: Ray's
    modules are imported by this one thread until ``ensure_ray`` returns, never by two threads at once.

    The thread stays parked after ``ray.init`` until the process exits: Ray starts its GCS and raylet with
    ``PR_SET_PDEATHSIG``, which Linux ties to the parent *thread*, so they would be killed when it ended."""
    if _early_unused() and _take_over(cfg, warm):
        return True
    import ray

    if ray.is_initialized() or _ray_start:
        return False
    _begin(cfg, warm)
    return True


def start_began() -> float | None:
    """When (``time.perf_counter``) the start in flight began: before the run's own start for an early one."""
    return _ray_start.get("began")


def _begin(cfg: Any, warm: Sequence[Stage] | None) -> None:
    """Start the thread that runs ``ray.init`` for ``cfg``; it then waits for the go-ahead (at once when ``warm``
    is given; an early start's from ``_take_over``) before it warms the workers and imports Ray Data."""
    box = dict(done=threading.Event(), imported=threading.Event(), go=threading.Event(), error=None)
    box.update(cfg=cfg, settings=ray_settings(cfg), began=time.perf_counter(), early=warm is None, warm=warm)
    _ray_start.update(box)
    if warm is not None:
        box["go"].set()

    def work(box: dict) -> None:
        try:
            try:
                import ray  # noqa: F401  (here first: the main thread's imports of Ray wait for it)
            finally:
                box["imported"].set()
            if box["go"].is_set() and box["warm"] is None:
                raise _Ended()  # ended before ray.init began (end_unused_start): nothing started, nothing to stop
            _init_ray(box["cfg"])
        except BaseException as exc:  # noqa: BLE001  (handed to the main thread by ensure_ray)
            box["error"] = exc
        else:
            if not box["go"].is_set():  # the run's config not checked yet: start the workers with what every run needs
                box["common_warm"] = prewarm_common()
            box["go"].wait()
            if box["warm"] is not None:  # None: the start is being ended, nothing to warm
                prewarm(box["warm"])
                import_ray_data()
        box["done"].set()
        _PARK.wait()  # never set: see start_ray's docstring

    _quiet_sigterm_warning()
    threading.Thread(target=work, args=(_ray_start,), name="vbench-ray-start", daemon=True).start()


def _early_unused() -> bool:
    return bool(_ray_start) and _ray_start["early"] and not _ray_start["go"].is_set()


def _take_over(cfg: Any, warm: Sequence[Stage]) -> bool:
    """The run takes the command's early start over (True), or ends it when the config asks Ray for other settings
    (``ray.address`` / ``ray.num_cpus`` set where the command's quick read did not see them)."""
    if ray_settings(cfg) == _ray_start["settings"]:
        _ray_start["warm"] = list(warm)
        _ray_start["go"].set()
        return True
    log.info("Ray: the config asks for %s, not %s: starting it again", ray_settings(cfg), _ray_start["settings"])
    end_unused_start()
    return False


def end_unused_start() -> None:
    """An early start no run took over (the command stopped first, e.g. on a config error): wait for it and shut
    down what it started (the local runtime: its own handle, ``ray.shutdown``; attached: the connection)."""
    if not _early_unused():
        return
    _ray_start["warm"] = None
    _ray_start["go"].set()
    error = settle_ray_start()
    ray = sys.modules.get("ray")
    if error is None and ray is not None and ray.is_initialized():
        ray.shutdown()


class _Ended(Exception):
    """An early start ended before ``ray.init`` began."""


def ray_imported() -> None:
    """Wait until a background start's thread has imported Ray (if one is in flight): one thread imports it."""
    if _ray_start:
        _ray_start["imported"].wait()


def early_start_in_flight() -> bool:
    """Whether this command's own early start (``start_ray_early``) is under way: Ray being up then says nothing
    about a cluster the run was attached to beforehand."""
    return bool(_ray_start) and _ray_start["early"]


def ensure_ray(cfg: Any) -> None:
    """Connect to ``ray.address`` / ``RAY_ADDRESS`` (a cluster, or inside ``ray job submit``), else start locally;
    when ``start_ray`` began that already, wait for it (and raise what it raised)."""
    if _early_unused():
        _take_over(cfg, ())
    error = settle_ray_start()
    if error is not None:
        raise error
    import ray

    if not ray.is_initialized():
        _init_ray(cfg)


def settle_ray_start() -> BaseException | None:
    """Wait for a background start (if any) to end and forget it; return its exception. A run calls this before
    it ends, so it never exits while ``ray.init`` is half done. An early start no run took over warms nothing."""
    if not _ray_start:
        return None
    if not _ray_start["go"].is_set():
        _ray_start["warm"] = None
        _ray_start["go"].set()
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
    import ray

    address, num_cpus = ray_settings(cfg)
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
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
    """Have the worker processes import the task stages' modules (``cpu`` and ``judge``) now, while the driver
    plans the stream.

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

    todo = [s for s in stages if s.kind != "pool" and getattr(s.fn, "__module__", None) and s.token not in _WARMED]
    try:  # never raises: it runs in the thread that starts Ray, whose end ensure_ray waits for
        modules: list[str] = []
        for stage in todo:
            declared = getattr(stage.fn, "warm_modules", None)  # e.g. the decode stage's metric libraries
            modules += [stage.fn.__module__] + (list(declared(stage.init_kwargs)) if declared else [])
        modules = list(dict.fromkeys(modules + list(RAY_DATA_TASK_MODULES) if modules else []))
        if not modules:
            return []
        cpus = capacity["CPU"] if capacity is not None else ray.cluster_resources().get("CPU", 1.0)
        refs = _send_imports(modules, cpus)
    except Exception as exc:  # noqa: BLE001  (an optimisation only: the stream's first tasks import them)
        log.debug("could not start the workers' imports early: %s", exc)
        return []
    _WARMED.update(s.token for s in todo)
    return refs


COMMON_TASK_MODULES = (*RAY_DATA_TASK_MODULES, "vbench_ray.pipeline")  # every stream's tasks: Ray Data's, the runner's


def prewarm_common() -> list:
    """Start the workers now, importing what the first task of every stream imports (``COMMON_TASK_MODULES``: Ray
    Data's package, pandas included, and the project's task runner), before the run's config is checked.

    Attached to a running cluster, the connection is up within a second of the command while the driver still
    imports the project and loads and checks its config: the job has no worker process until its first task,
    and a fresh worker takes seconds to start (the interpreter, Ray, Ray Data: docs/performance.md). Started here,
    the stage's own prewarm (``prewarm``, once the plan is built) finds the same processes up and adds only the
    stage's modules. Only imports run: a run whose config is refused computes nothing, and its workers end with
    its connection (``end_unused_start``). One task per CPU of the cluster; fire and forget (refs returned)."""
    import ray

    try:
        return _send_imports(list(COMMON_TASK_MODULES), ray.cluster_resources().get("CPU", 1.0))
    except Exception as exc:  # noqa: BLE001  (an optimisation only: the stream's first tasks import them)
        log.debug("could not start the workers early: %s", exc)
        return []


def _send_imports(modules: list[str], cpus: float) -> list:
    """One ``_import_modules`` task per CPU (at most 256), each on a CPU of its own: a worker process each."""
    import ray

    warm = ray.remote(num_cpus=1, max_retries=0)(_import_modules)
    return [warm.remote(modules) for _ in range(max(1, min(int(cpus), 256)))]


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
