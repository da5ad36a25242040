"""The engine: token-budget batching, order, blanks, the model registry and its LRU."""

from __future__ import annotations

import shutil
import threading

import pytest

from stapel.exceptions import ModelUnavailable
from stapel.model_dirs import scan
from stapel.settings import Settings
from workers.engine import Engine, pick_batch_limits, pick_compute_type, pick_parallel
from workers.runtime import build_engine


@pytest.mark.parametrize(
    ("device", "asked", "resolved"),
    [
        ("cpu", "auto", "int8"),
        ("cuda", "auto", "int8_float16"),
        ("cpu", "float32", "float32"),
    ],
)
def test_compute_type(device, asked, resolved):
    assert pick_compute_type(device, asked) == resolved


@pytest.fixture
def engine(model_root):
    return Engine(model_root, max_decoding_length=16, batch_tokens=64, max_loaded=1)


def test_order_is_kept_and_batching_does_not_change_output(engine):
    texts = [f"word {'x ' * (i % 7)}end" for i in range(30)]
    together = engine.translate("en-de", texts)
    alone = [engine.translate("en-de", [t])[0] for t in texts]
    assert together == alone
    assert len(set(together)) > 1  # the model really produces different outputs


def test_blank_segments_pass_through(engine):
    out = engine.translate("en-de", ["", "  ", "hello", "\t"])
    assert out[0] == "" and out[1] == "  " and out[3] == "\t"
    assert out[2] == engine.translate("en-de", ["hello"])[0]


def test_batches_are_yielded_with_indexes(engine):
    items = [(10 + i, f"segment {'y ' * i}") for i in range(12)]
    seen = [index for batch in engine.translate_batches("en-de", items) for index, _ in batch]
    assert sorted(seen) == list(range(10, 22))


def test_lru_keeps_bounded_count(engine):
    engine.translate("en-de", ["a"])
    engine.translate("de-en", ["a"])
    assert engine.loaded_pairs() == ["de-en"]


def test_unknown_pair_is_unavailable_here_and_listed_broken(engine):
    with pytest.raises(ModelUnavailable, match="no complete model directory en-fr"):
        engine.translate("en-fr", ["x"])
    assert "en-fr" in engine.broken()


def test_registry_accepts_opus_mt_layout(model_root, tmp_path):
    """A directory arranged like `ct2-transformers-converter` output of an OPUS-MT model."""
    opus = tmp_path / "root" / "en-fi"
    shutil.copytree(model_root / "en-de", opus)
    for extra in ("tokenizer_config.json", "vocab.json", "generation_config.json"):
        (opus / extra).write_text("{}")
    assert sorted(p.name for p in opus.iterdir()) == sorted(
        [
            "config.json",
            "model.bin",
            "shared_vocabulary.json",
            "source.spm",
            "target.spm",
            "tokenizer_config.json",
            "vocab.json",
            "generation_config.json",
        ]
    )
    found = scan(tmp_path / "root")
    assert list(found) == ["en-fi"] and found["en-fi"].source == "en"
    engine = Engine(tmp_path / "root", max_decoding_length=8)
    assert len(engine.translate("en-fi", ["hello there"])) == 1


def test_registry_skips_incomplete_and_misnamed(tmp_path, model_root):
    shutil.copytree(model_root / "en-de", tmp_path / "en-de")
    (tmp_path / "de-en").mkdir()
    (tmp_path / "de-en" / "model.bin").write_bytes(b"")
    shutil.copytree(model_root / "en-de", tmp_path / "english-german")
    (tmp_path / "notes.txt").write_text("x")
    assert list(scan(tmp_path)) == ["en-de"]
    assert scan(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    ("device", "threads", "asked", "resolved"),
    [
        ("cpu", 2, 0, (2, 1)),  # default on CPU: one batch per thread
        ("cpu", 8, 2, (2, 4)),  # two batches of four threads
        ("cpu", 2, 4, (4, 1)),  # more batches than threads: one thread each
        ("cuda", 16, 0, (1, 0)),  # one batch at a time on a GPU
        ("cuda", 16, 2, (2, 0)),
    ],
)
def test_parallel_batches_and_threads_per_batch(device, threads, asked, resolved):
    assert pick_parallel(device, threads, asked) == resolved


@pytest.mark.parametrize(
    ("device", "tokens", "memory", "resolved"),
    [
        ("cpu", None, None, (4096, 6144)),  # unset: the CPU's limits
        ("cuda", None, None, (16384, 65536)),  # unset on a GPU: four budgets, its memory
        ("cuda", 2048, None, (2048, 65536)),  # each setting on its own
        ("cpu", None, 0, (4096, 0)),  # 0 stays: no memory bound
    ],
)
def test_batch_limits_by_device(device, tokens, memory, resolved):
    assert pick_batch_limits(device, tokens, memory) == resolved


def test_a_worker_takes_its_devices_batch_limits_unless_set(tmp_path):
    def limits(env):
        engine = build_engine(Settings.from_env({"STAPEL_MODEL_ROOT": str(tmp_path), **env}))
        return engine.device, engine.batch_tokens, engine.batch_memory_tokens

    assert limits({"STAPEL_DEVICE": "cpu"}) == ("cpu", 4096, 6144)
    assert limits({"STAPEL_DEVICE": "cuda"}) == ("cuda", 16384, 65536)
    assert limits(
        {"STAPEL_DEVICE": "cuda", "STAPEL_BATCH_TOKENS": "512", "STAPEL_BATCH_MEMORY_TOKENS": "0"}
    ) == ("cuda", 512, 0)


def test_engine_translates_with_the_parallel_translators(model_root):
    engine = Engine(model_root, threads=2, parallel_batches=2, max_decoding_length=8)
    loaded = engine.model("en-de")
    assert loaded.translator.num_translators == 2
    assert engine.translate("en-de", ["hello"]) == Engine(
        model_root, threads=1, parallel_batches=1, max_decoding_length=8
    ).translate("en-de", ["hello"])


class HeldLoads(Engine):
    """An engine whose loads of one pair wait for the test's word before loading for real."""

    def __init__(self, *args, held: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.held, self.started, self.go = held, threading.Event(), threading.Event()
        self.loads: list[str] = []

    def _load(self, found):
        self.loads.append(found.pair)
        if found.pair == self.held:
            self.started.set()
            assert self.go.wait(60), "the test never let the load finish"
        return super()._load(found)


def in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_slow_load_does_not_stall_the_pairs_already_loaded(model_root):
    engine = HeldLoads(model_root, max_decoding_length=16, batch_tokens=64, held="de-en")
    before = engine.translate("en-de", ["hello world"])
    loading = in_thread(lambda: engine.translate("de-en", ["hallo welt"]))
    assert engine.started.wait(30)
    # while de-en loads: en-de translates, the presence snapshot's reads answer
    done = []
    other = in_thread(lambda: done.append(engine.translate("en-de", ["hello world"])))
    other.join(30)
    assert done == [before] and loading.is_alive()
    assert engine.broken() == {} and engine.loaded_pairs() == ["en-de"]
    # a second caller of the pair waits for the one load in progress
    second = in_thread(lambda: engine.translate("de-en", ["hallo"]))
    engine.go.set()
    loading.join(30)
    second.join(30)
    assert not loading.is_alive() and not second.is_alive()
    assert engine.loads == ["en-de", "de-en"] and engine.loaded_pairs() == ["en-de", "de-en"]


def test_wait_loaded_ticks_while_loading_and_stops_when_told(model_root):
    engine = HeldLoads(model_root, max_decoding_length=16, batch_tokens=64, held="de-en")
    ticks: list[int] = []

    def tick() -> bool:
        ticks.append(len(ticks))
        return len(ticks) < 3  # the claim is lost at the third tick

    assert engine.wait_loaded("de-en", 0.01, tick) is False
    assert len(ticks) == 3 and "de-en" not in engine.loaded_pairs()
    engine.go.set()  # the load goes on without the caller that gave up
    assert engine.wait_loaded("de-en", 0.01, lambda: True) is True
    assert engine.loaded_pairs() == ["de-en"] and engine.loads == ["de-en"]
    with pytest.raises(ModelUnavailable, match="en-fr"):
        engine.wait_loaded("en-fr", 0.01, lambda: True)
