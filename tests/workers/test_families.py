"""Multilingual model folders (NLLB, M2M100, MADLAD) served as converted, token for token
what the family's own Hugging Face call gives, one translator per model."""

from __future__ import annotations

import pytest

from stapel.model_dirs import multilingual, problems, scan
from tests.families import build_hf, convert, reference
from workers.engine import Engine

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _reference_libraries():
    """Skip where the train extra is missing; imported here, not at collection, so
    the unit tier never loads them."""
    pytest.importorskip("transformers")


TEXTS = ["das Haus ist klein", "ein Hund lief schnell", "hello world"]
STEPS = 12
NATIVE = {
    "nllb": {"de": "deu_Latn", "fr": "fra_Latn", "en": "eng_Latn"},
    "m2m100": {"de": "de", "fr": "fr", "en": "en"},
    "madlad": {"de": "de", "fr": "fr", "en": "en"},
}
"""The public codes the tests use and each family's own code for them."""


@pytest.fixture(scope="session")
def family_models(tmp_path_factory):
    """A model root with one tiny model of each family under a made-up folder name."""
    root = tmp_path_factory.mktemp("families")
    built = {}
    for family in NATIVE:
        hf_dir = tmp_path_factory.mktemp(f"hf-{family}")
        model, tok = build_hf(family, hf_dir)
        convert(family, hf_dir, root / f"my-{family}-model")
        built[family] = (model, tok)
    return root, built


@pytest.fixture
def engine(family_models):
    root, _ = family_models
    return Engine(
        root, compute_type="float32", max_decoding_length=STEPS, batch_tokens=256, threads=1
    )


def test_folders_are_found_under_any_name_with_iso_codes(family_models):
    root, _ = family_models
    found = scan(root)
    assert problems(root) == {}
    assert {name: m.family for name, m in multilingual(root).items()} == {
        "my-m2m100-model": "m2m100",
        "my-madlad-model": "madlad",
        "my-nllb-model": "nllb",
    }
    first = found["de-fr"]  # a pair several models serve: the first folder by name
    assert first.model == "my-m2m100-model"
    assert (first.source_token, first.target_token) == ("__de__", "__fr__")
    assert found["zh_Hans-zh_Hant"].target_token == "zho_Hant"  # scripts kept where two
    nllb = multilingual(root)["my-nllb-model"].languages
    assert nllb["ar"] == "arb_Arab" and nllb["ms"] == "zsm_Latn" and nllb["de"] == "deu_Latn"
    assert nllb["ace_Arab"] == "ace_Arab" and nllb["ckb"] == "ckb_Arab"  # no 639-1 code


def test_a_folder_with_a_model_but_no_tokenizer_is_named_in_problems(tmp_path, family_models):
    root, _ = family_models
    broken = tmp_path / "half-copied"
    broken.mkdir()
    (broken / "model.bin").write_bytes((root / "my-nllb-model" / "model.bin").read_bytes())
    assert "no SentencePiece model" in problems(tmp_path)["half-copied"]
    assert scan(tmp_path) == {}


@pytest.mark.parametrize("family", list(NATIVE))
def test_each_target_gives_the_familys_reference_output(family, family_models, tmp_path):
    root, built = family_models
    alone = tmp_path / "root"
    alone.mkdir()
    (alone / "m").symlink_to(root / f"my-{family}-model")
    engine = Engine(
        alone, compute_type="float32", max_decoding_length=STEPS, batch_tokens=256, threads=1
    )
    model, tok = built[family]
    native = NATIVE[family]
    outputs = {}
    for target in ("fr", "en"):
        expected = reference(family, model, tok, TEXTS, native["de"], native[target], STEPS)
        outputs[target] = engine.translate(f"de-{target}", TEXTS, split_sentences=False)
        assert outputs[target] == expected
    assert outputs["fr"] != outputs["en"]  # the target language reaches the model
    assert engine.loaded_pairs() == ["m"]  # one translator for both pairs


def test_pairs_of_one_model_share_a_batch_and_keep_their_targets(engine):
    engine.batch_wait_s = 0.5
    alone = {t: engine.translate(f"de-{t}", TEXTS, split_sentences=False) for t in ("fr", "en")}
    batcher = engine.model("de-fr").batcher
    # both submitted before the first batch is due: they meet in one batch
    requests = {
        t: engine.translate_batches(f"de-{t}", enumerate(TEXTS), split_sentences=False)
        for t in ("fr", "en")
    }
    together = {}
    for target, request in requests.items():
        out = dict(item for part in request for item in part)
        request.release()
        together[target] = [out[i] for i in range(len(TEXTS))]
    assert together == alone  # identical sources of two targets never ride on each other
    assert batcher.stats.deduplicated == 0


def test_one_model_counts_once_and_each_pair_has_its_own_fingerprint(family_models):
    root, _ = family_models
    engine = Engine(root, compute_type="float32", max_decoding_length=STEPS, max_loaded=1)
    fps = {pair: engine.fingerprint(pair) for pair in ("de-fr", "de-en", "fr-de")}
    assert len(set(fps.values())) == 3
    assert engine.loaded_pairs() == ["my-m2m100-model"]
    assert engine.model("de-fr") is engine.model("en-de")  # never a second copy


def test_a_manifest_overrides_what_detection_would_find(family_models, tmp_path):
    root, _ = family_models
    folder = tmp_path / "root" / "renamed-model"
    folder.mkdir(parents=True)
    for path in (root / "my-nllb-model").iterdir():
        if path.name != "tokenizer_config.json":
            (folder / path.name).symlink_to(path)
    (folder / "stapel.json").write_text(
        '{"family": "nllb", "languages": {"de": "deu_Latn", "fr": "fra_Latn"}, '
        '"max_input_tokens": 32}'
    )
    found = scan(tmp_path / "root")
    assert sorted(found) == ["de-fr", "fr-de"]
    assert found["de-fr"].target_token == "fra_Latn" and found["de-fr"].max_input_tokens == 32
    engine = Engine(tmp_path / "root", compute_type="float32", max_decoding_length=STEPS)
    assert engine.model("de-fr").batcher.max_input_tokens == 32


def test_an_opus_mt_pair_folder_gives_marians_reference_output(tmp_path):
    hf_dir = tmp_path / "hf"
    model, tok = build_hf("marian", hf_dir)
    convert("marian", hf_dir, tmp_path / "root" / "de-en")  # --copy_files source.spm target.spm
    engine = Engine(tmp_path / "root", compute_type="float32", max_decoding_length=STEPS)
    expected = reference("marian", model, tok, TEXTS, "de", "en", STEPS)
    assert engine.translate("de-en", TEXTS, split_sentences=False) == expected


def test_a_model_that_would_stop_at_once_still_says_something(tmp_path):
    import torch

    hf_dir = tmp_path / "hf"
    model, _tok = build_hf("marian", hf_dir)
    with torch.no_grad():
        model.final_logits_bias[0, model.config.eos_token_id] = 50.0  # </s> first, always
    model.save_pretrained(hf_dir)
    convert("marian", hf_dir, tmp_path / "root" / "de-en")
    default = Engine(tmp_path / "root", compute_type="float32", max_decoding_length=STEPS)
    assert all(default.translate("de-en", TEXTS))  # STAPEL_MIN_DECODING_LENGTH=1
    empty = Engine(tmp_path / "root", compute_type="float32", min_decoding_length=0)
    assert empty.translate("de-en", TEXTS) == ["", "", ""]


def test_a_changed_folder_is_detected_again(family_models, tmp_path):
    root, _ = family_models
    folder = tmp_path / "root" / "m"
    folder.mkdir(parents=True)
    for path in (root / "my-nllb-model").iterdir():
        (folder / path.name).symlink_to(path)
    assert "de-fr" in scan(tmp_path / "root")
    (folder / "stapel.json").write_text('{"languages": {"de": "deu_Latn", "en": "eng_Latn"}}')
    assert sorted(scan(tmp_path / "root")) == ["de-en", "en-de"]


def test_inline_codes_come_back_through_a_multilingual_model(engine):
    tagged = "\ufdd01\ufdd3das Haus\ufdd11\ufdd3 ist klein"
    (out,) = engine.translate("de-fr", [tagged])
    assert out.count("\ufdd01\ufdd3") == 1 and out.count("\ufdd11\ufdd3") == 1
    plain = out.replace("\ufdd01\ufdd3", "").replace("\ufdd11\ufdd3", "")
    assert plain.strip() == engine.translate("de-fr", ["das Haus ist klein"])[0].strip()


def test_the_queued_path_gives_and_strips_each_pairs_target(family_models, monkeypatch):
    """A GPU's batcher queues batches (asynchronous=True) and delivers them on another
    thread: it must give each piece its target language and decode as the other path."""
    root, _ = family_models
    options = {"compute_type": "float32", "max_decoding_length": STEPS, "threads": 1}
    plain = Engine(root, batch_tokens=256, **options)
    alone = {t: plain.translate(f"de-{t}", TEXTS, split_sentences=False) for t in ("fr", "en")}
    monkeypatch.setattr("workers.engine.pick_in_flight", lambda device: 2)
    queued = Engine(root, batch_tokens=256, **options)
    assert queued.model("de-fr").batcher.in_flight == 2
    got = {t: queued.translate(f"de-{t}", TEXTS, split_sentences=False) for t in ("fr", "en")}
    assert got == alone
