"""A Spark standalone cluster on loopback, started from the pyspark package (``bin/spark-class``): a master and
one-core workers, for the standalone-cluster test and the Spark benchmark's ``standalone[N]`` runs. Master and
workers are stopped by their process groups (spark-class execs the JVM in a session of its own)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(log.parent), "PYSPARK_PYTHON": sys.executable}
    with log.open("wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@contextlib.contextmanager
def standalone_cluster(logs: Path, workers: int = 2, memory: str = "1g") -> Iterator[str]:
    """A master and ``workers`` one-core workers writing their logs under ``logs``; yields the master's URL."""
    logs.mkdir(parents=True, exist_ok=True)
    port, ui = _free_port(), _free_port()
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(ui)], logs / "master.log")
    started: list[subprocess.Popen[bytes]] = []
    try:
        _wait_for_port(port)
        url = f"spark://127.0.0.1:{port}"
        for i in range(workers):
            worker_ui = _free_port()
            started.append(_start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port",
                                   str(worker_ui), "--cores", "1", "--memory", memory, "--work-dir",
                                   str(logs / f"work-{i}"), url], logs / f"worker-{i}.log"))
            _wait_for_port(worker_ui)
        yield url
    finally:
        for worker in started:
            _stop(worker)
        _stop(master)
