"""--device: cpu runs as before; cuda without a usable GPU (CI) exits 1 naming
what is missing; bad values are usage errors. With a GPU, inspect names the
device and the commands run the model there."""
import subprocess

DEMO = "models/tern-demo-code-17m"


def run(tern_bin, *args, env=None):
    return subprocess.run([tern_bin, *args], capture_output=True, text=True, timeout=60, env=env)


def test_device_cpu_inspect(tern_bin):
    r = run(tern_bin, "inspect", "--model", DEMO, "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert "device         cpu" in r.stdout


def test_device_cuda_inspect(tern_bin):
    r = run(tern_bin, "inspect", "--model", DEMO, "--device", "cuda")
    if r.returncode == 0:  # a usable GPU
        assert "device         cuda:0 " in r.stdout
    else:
        assert r.returncode == 1 and "--device cuda:0: no usable CUDA device" in r.stderr, r.stderr
        assert r.stdout == ""


def test_device_cuda_runs_or_is_refused_clearly(tern_bin):
    for cmd in (["logits", "--model", DEMO, "--ids", "1,2", "--out", "/dev/null"],
                ["generate", "--model", DEMO, "--ids", "1,2", "--max-tokens", "1"]):
        r = run(tern_bin, *cmd, "--device", "cuda")
        if r.returncode == 0:  # a usable GPU: the forward runs there
            continue
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert "--device cuda:0: no usable CUDA device" in r.stderr, r.stderr
        assert r.stdout == ""


def test_device_bad_values(tern_bin):
    for v in ("gpu", "cuda:x", "cuda:-1", ""):
        r = run(tern_bin, "inspect", "--model", DEMO, "--device", v)
        assert r.returncode == 2, (v, r.stderr)
        assert "--device must be cpu or cuda[:N]" in r.stderr
    r = run(tern_bin, "inspect", "--model", DEMO, "--device")
    assert r.returncode == 2 and "needs a value" in r.stderr


def test_device_env_default(tern_bin):
    import os
    env = dict(os.environ, TERN_DEVICE="cuda")
    r = run(tern_bin, "generate", "--model", DEMO, "--ids", "1", "--max-tokens", "1", env=env)
    assert r.returncode == 0 or (r.returncode == 1 and "--device cuda:0:" in r.stderr)
    r = run(tern_bin, "inspect", "--model", DEMO, "--device", "cpu", env=env)
    assert r.returncode == 0
