"""The `stapel` command against the real app over HTTP and a real worker; worker metrics,
log files and tracer blocks of that worker."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from stapel_cli.main import main, output_path, progress_line
from tests.conftest import ROOT, free_port
from tests.factories import sentences, wait_for
from tests.workers_proc import ServerThread, WorkerProcess


@pytest.fixture
def server(app):
    with ServerThread(app) as srv:
        yield srv


@pytest.mark.parametrize(
    "done, total, elapsed, at_start, expected",
    [
        (0, 10, 0.0, 0, "[..........] 0/10 segments ETA ?"),
        (5, 10, 1.0, 0, "[#####.....] 5/10 segments 5.0/s ETA 1s"),
        (10, 10, 2.0, 0, "[##########] 10/10 segments 5.0/s done"),
        # done when first seen (answered from the cache at submit): no rate at all
        (10, 10, 0.000001, 10, "[##########] 10/10 segments done"),
        (10, 10, 3.0, 10, "[##########] 10/10 segments done"),
        # a rate over the segments done while watching only, not over a blink
        (8, 10, 2.0, 4, "[########..] 8/10 segments 2.0/s ETA 1s"),
        (5, 10, 0.1, 0, "[#####.....] 5/10 segments ETA ?"),
    ],
)
def test_progress_line(done, total, elapsed, at_start, expected):
    assert progress_line(done, total, elapsed, width=10, done_at_start=at_start) == expected


@pytest.mark.process
def test_errors_name_the_cause_and_exit_non_zero(server, tmp_path, capsys):
    text = tmp_path / "a.txt"
    text.write_text("Hello.\n")
    assert main(["--url", server.url, "--key", "stp_wrong", "status", "x"]) == 1
    assert "HTTP 401" in capsys.readouterr().err
    args = [
        "--url",
        server.url,
        "--key",
        "stp_wrong",
        "translate",
        str(text),
        "--from",
        "en",
        "--to",
        "de",
    ]
    assert main(args) == 1 and "(unauthorized)" in capsys.readouterr().err
    assert main(args[:5] + [str(tmp_path / "missing.txt")] + args[6:]) == 1
    assert "no such file" in capsys.readouterr().err
    closed = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [str(ROOT / "bin" / "stapel"), "--url", closed, "--key", "k", "jobs"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin"},
    )
    assert done.returncode == 1 and f"cannot connect to {closed}" in done.stderr
    missing_key = subprocess.run(
        [sys.executable, "-m", "stapel_cli", "jobs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={},
    )
    assert missing_key.returncode == 2 and "no API key" in missing_key.stderr


def test_bad_request_shows_the_servers_message(server, api_key, tmp_path, capsys):
    text = tmp_path / "a.txt"
    text.write_text("Hello.\n")
    assert (
        main(
            [
                "--url",
                server.url,
                "--key",
                api_key,
                "translate",
                str(text),
                "--from",
                "en",
                "--to",
                "xx",
            ]
        )
        == 1
    )
    assert "(unknown_language_pair)" in capsys.readouterr().err


TMX = (
    '<?xml version="1.0"?><tmx version="1.4"><header srclang="en" segtype="sentence" '
    'datatype="plaintext" adminlang="en" creationtool="t" creationtoolversion="1" o-tmf="t"/>'
    '<body><tu><tuv xml:lang="en"><seg>Hello world.</seg></tuv>'
    '<tuv xml:lang="de"><seg>Hallo Welt.</seg></tuv></tu></body></tmx>'
)


def test_memory_import_list_export_delete(server, api_key, tmp_path, capsys):
    base = ["--url", server.url, "--key", api_key, "memory"]
    source = tmp_path / "ui.tmx"
    source.write_text(TMX)
    assert main([*base, "import", str(source), "--from", "en", "--to", "de", "--name", "ui"]) == 0
    memory_id, *rest = capsys.readouterr().out.split()
    assert rest == ["1", "units", "en-de"]
    assert main([*base, "list"]) == 0
    listed = capsys.readouterr().out
    assert memory_id in listed and "en-de" in listed and "ui" in listed
    exported = tmp_path / "out.tmx"
    assert main([*base, "export", memory_id, "-o", str(exported)]) == 0
    assert "<seg>Hallo Welt.</seg>" in exported.read_text()
    assert not (tmp_path / "out.tmx.part").exists()
    assert main([*base, "delete", memory_id]) == 0
    capsys.readouterr()
    assert main([*base, "export", memory_id, "-o", str(tmp_path / "gone.tmx")]) == 1
    assert "HTTP 404" in capsys.readouterr().err and not (tmp_path / "gone.tmx").exists()
    source.write_text(TMX[:-30])
    assert main([*base, "import", str(source), "--from", "en", "--to", "de"]) == 1
    assert "(invalid_tmx)" in capsys.readouterr().err
    assert main([*base, "import", str(tmp_path / "none.tmx"), "--from", "en", "--to", "de"]) == 1
    assert "no such file" in capsys.readouterr().err


def metric(text: str, name: str, **labels) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and labels.items() <= s.labels.items():
                return s.value
    return 0.0


@pytest.mark.e2e
def test_translate_files_end_to_end_with_worker_metrics_and_logs(
    app, server, api_key, settings_overrides, tmp_path, capsys
):
    log_dir, port = tmp_path / "log", free_port()
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_MAX_DECODING_LENGTH": "16",
        "STAPEL_BATCH_TOKENS": "256",
        "STAPEL_METRICS_PORT": str(port),
        "STAPEL_LOG_DIR": str(log_dir),
        "STAPEL_TRACER_S": "1",
    }
    worker = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    try:
        first, second = tmp_path / "chapter1.txt", tmp_path / "chapter2.txt"
        first.write_text("\n".join([*sentences(4), "", sentences(1, seed=3)[0]]) + "\n")
        second.write_text("\n".join(sentences(3, seed=5)) + "\n")
        base = ["--url", server.url, "--key", api_key]
        code = main(
            [
                *base,
                "translate",
                str(first),
                str(second),
                "--from",
                "en",
                "--to",
                "de",
                "--interval",
                "0.2",
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, (err, worker.log())
        assert out.split() == [str(output_path(first, "de")), str(output_path(second, "de"))]
        job_id = re.search(r"job (\S+) queued", err).group(1)
        assert "\r[" in err and "9/9 segments" in err and "done" in err
        translated = (tmp_path / "chapter1.de.txt").read_text().split("\n")
        assert len(translated) == 7 and translated[4] == "" and all(translated[:4])
        assert len((tmp_path / "chapter2.de.txt").read_text().splitlines()) == 3

        assert main([*base, "status", job_id]) == 0
        assert f"{job_id} succeeded 9/9 segments en-de" in capsys.readouterr().out
        assert main([*base, "result", job_id]) == 0
        printed = capsys.readouterr().out.splitlines()
        assert printed[0] == "# chapter1.txt" and printed[1:7] == translated[:6]
        assert main([*base, "jobs", "--status", "succeeded"]) == 0
        assert job_id in capsys.readouterr().out

        scraped = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert metric(scraped, "stapel_segments_translated_total", pair="en-de") == 9
        assert metric(scraped, "stapel_model_loads_total", pair="en-de") == 1
        assert metric(scraped, "stapel_model_cache_total", pair="en-de", result="miss") == 1
        assert metric(scraped, "stapel_chunks_total", outcome="succeeded") == 1
        for stage in ("tokenize", "translate", "write"):
            assert metric(scraped, "stapel_stage_seconds_count", stage=stage) >= 1
        assert metric(scraped, "stapel_batch_size_count", pair="en-de") >= 1

        tracer = log_dir / "stapel.tracer"
        wait_for(
            lambda: (
                tracer.exists()
                and re.search(r"stage=translate count=[1-9]", tracer.read_text())
                and f"worker={worker.name} models=en-de" in tracer.read_text()
            ),
            timeout=30,
            what="tracer blocks with translate times and loaded models",
        )
        block = tracer.read_text()
        assert f"tracer process={worker.name}" in block and "latency_s p50=" in block
        assert "queue_depth" in block and f"worker={worker.name} models=en-de" in block
        info = (log_dir / "stapel.log").read_text()
        assert re.search(rf"chunk claimed logid={job_id} chunk=0 ", info)
        assert "DEBUG" not in info and (log_dir / "stapel.log.wf").exists()
        assert sentences(4)[0] not in info, "segment text stays out of the log"
    finally:
        worker.stop()
