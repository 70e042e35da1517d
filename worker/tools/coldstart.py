"""The Worker's cold start as production serves it: from the *dedicated* memory snapshot a deploy
gets (see workerd_harness.production_implied_flags), the CPU workerd spends from its process
start to the first response, beside a hello-world Python Worker staged with the same
compatibility date and flags (and no vendored packages). The template vendors what a deploy
vendors (:data:`PYWRANGLER_WHEELS`).

For each Worker, one workerd writes its snapshot (``--python-save-snapshot``: with
``python_dedicated_snapshot`` on, taken after the Worker's top-level code ran, as Cloudflare's
upload does); then fresh workerd processes start from it (``--python-load-snapshot``), the two
Workers alternating and the order flipped every round, and each answers one ``GET`` (the
template: its agent card, which reads the Worker's config; hello world: a text). The figure is
the process's utime + stime (/proc, 10 ms ticks) when the response has been read: Pyodide's
restore, the isolate, the request.
"""

from __future__ import annotations

import http.client
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from workerd_harness import (
    REPO_ROOT,
    SNAPSHOT_NAME,
    TEMPLATE,
    Workerd,
    binary_config,
    read_worker,
    stage,
    stage_worker,
)

PYWRANGLER_WHEELS = REPO_ROOT / "harness" / "wasm" / "wheels"
"""The plain wheels (``make wasm-wheels``): what ``pywrangler sync`` vendors into
``python_modules/`` for a deploy -- ``.py`` files, no ``.pyc`` (the tests' default set,
``harness/wasm/wheels-pyc``, holds both). From a dedicated snapshot the imports are already done, so
the ``.pyc`` files only add modules to load."""

FLOOR_IMPORTS = "import msgspec  # noqa: F401\n"
"""What the dependency floor adds to :data:`HELLO_ENTRY`: bindloop's compiled dependency imported
(its ``.so`` is loaded again at every start from a snapshot)."""

HELLO_ENTRY = '''from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("hello")
'''


def hello_world(directory: Path, prelude: str = "") -> Path:
    """A hello-world Python Worker in ``directory`` with the template's compatibility date and
    flags, ``prelude`` (top-level code) before its entrypoint."""
    (directory / "src").mkdir(parents=True, exist_ok=True)
    (directory / "src" / "entry.py").write_text(prelude + HELLO_ENTRY)
    (directory / "wrangler.jsonc").write_text(json.dumps({
        "name": "hello", "main": "src/entry.py",
        "compatibility_date": TEMPLATE.compatibility_date,
        "compatibility_flags": list(TEMPLATE.compatibility_flags)}))
    return directory


def cpu_s(pid: int) -> float:
    """CPU seconds the threads of ``pid`` have run, to the nanosecond (the scheduler's own
    account; ``/proc/<pid>/stat``'s utime + stime count 10 ms ticks, too coarse for a ratio of
    two starts of about 0.25 s)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except FileNotFoundError:  # a thread that ended between the listing and the read
            continue
    return total / 1e9


def _get(port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: {resp.status} {body[:500]!r}")
        return body
    finally:
        conn.close()


def snapshot_kind(snapshot: Path) -> str:
    """``"dedicated"`` or ``"baseline"``: what the snapshot's metadata says it is."""
    head = snapshot.read_bytes()[:4 * 2**20]
    for kind in ("dedicated", "baseline"):
        if f'"snapshotType":"{kind}"'.encode() in head:
            return kind
    raise RuntimeError(f"{snapshot}: no snapshotType in its metadata")


class Subject:
    """One Worker staged, its snapshot written, started cold from it on demand."""

    def __init__(self, name: str, config: Path, path: str, snapshots: Path) -> None:
        self.name = name
        self.config = binary_config(config)
        self.path = path
        self.snapshots = snapshots
        with Workerd(self.config, snapshot=("save", snapshots)) as wd:
            _get(wd.port, path)
        self.snapshot = snapshots / SNAPSHOT_NAME
        self.kind = snapshot_kind(self.snapshot)

    def cold(self) -> float:
        """CPU seconds of a fresh workerd from its start to the first response read."""
        with Workerd(self.config, snapshot=("load", self.snapshots)) as wd:
            _get(wd.port, self.path)
            return cpu_s(wd.pid)


def measure(rounds: int, *, wheels_dir: Path = PYWRANGLER_WHEELS, floor: bool = False,
            say: Callable[[str], None] = lambda _: None) -> dict[str, object]:
    """``rounds`` cold starts of each Worker, the template vendoring the wheels of
    ``wheels_dir`` (by default the plain wheels, as ``pywrangler sync`` vendors them: ``.py``
    files only); returns the medians (seconds), the ratio, each sample, the snapshots' kinds and
    sizes, and how many files the template vendors. ``floor`` adds a third Worker to the
    alternation, the *dependency floor*: hello world vendoring the same wheels and importing
    ``msgspec`` (:data:`FLOOR_IMPORTS`), what any Worker with bindloop's dependencies starts
    with (``floor_s``, ``floor_ratio`` = floor / hello world, ``over_floor`` = template /
    floor)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        template = Subject("template", stage(
            root / "template", storage_dir=root / "do", with_conformance=False,
            bindings={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                      "OPENAI_API_KEY": "k"}, wheels_dir=wheels_dir),
            "/.well-known/agent-card.json", root / "snap-template")
        hello = Subject("hello", stage_worker(
            read_worker(hello_world(root / "hello-src")), root / "hello",
            storage_dir=root / "do-hello", wheels_dirs=()), "/", root / "snap-hello")
        subjects = [template, hello]
        if floor:
            subjects.append(Subject("floor", stage_worker(
                read_worker(hello_world(root / "floor-src", FLOOR_IMPORTS)), root / "floor",
                storage_dir=root / "do-floor", wheels_dirs=(wheels_dir,)), "/",
                root / "snap-floor"))
        samples: dict[str, list[float]] = {s.name: [] for s in subjects}
        for i in range(rounds):
            # Each Worker takes each place in turn (two Workers: the order flipped every round).
            order = subjects[i % len(subjects):] + subjects[:i % len(subjects)]
            for subject in order:
                samples[subject.name].append(subject.cold())
                say(f"  {subject.name}: {samples[subject.name][-1] * 1000:.0f} ms CPU")
        med = {k: statistics.median(v) for k, v in samples.items()}
        vendored = sum(1 for p in (root / "template" / "python_modules").rglob("*")
                       if p.is_file())
        result: dict[str, object] = {
            "template_s": med["template"], "hello_s": med["hello"],
            "ratio": med["template"] / med["hello"], "samples": samples,
            "kinds": {s.name: s.kind for s in subjects},
            "vendored_files": vendored,
            "snapshot_mib": {s.name: s.snapshot.stat().st_size / 2**20 for s in subjects}}
        # Each round's own ratio (the Workers of a round start back to back): their spread is
        # the figure's noise within this run, which the ratio of the medians does not show.
        result["ratio_quartiles"] = _quartiles(samples["template"], samples["hello"])
        if floor:
            result.update(floor_s=med["floor"], floor_ratio=med["floor"] / med["hello"],
                          over_floor=med["template"] / med["floor"],
                          over_floor_quartiles=_quartiles(samples["template"], samples["floor"]))
        return result


def _quartiles(over: list[float], under: list[float]) -> tuple[float, float]:
    """The first and third quartiles of the rounds' paired ratios ``over[i] / under[i]``
    (both the one ratio when there is a single round)."""
    paired = [a / b for a, b in zip(over, under)]
    if len(paired) < 2:
        return paired[0], paired[0]
    q1, _, q3 = statistics.quantiles(paired, n=4, method="inclusive")
    return q1, q3
