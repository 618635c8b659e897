"""The packages read for their messages only (tools/stack_messages.py): which versions, which
files, and how their messages join the stack catalogue; and how a package message in a log is
set beside the installed version."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import gen_stack_knowledge as gen  # noqa: E402
import stack_messages  # noqa: E402
from stack_messages import MessageSource  # noqa: E402

from vllm_doctor.engine.logreport import installed_note, version_in_log_lines  # noqa: E402


def versions(*texts: str) -> list[Version]:
    return [Version(t) for t in texts]


def test_ends_only_reads_the_ends_each_requirement_allows_and_pins_as_written():
    index = versions("4.55.0", "4.55.4", "4.56.0", "4.56.2", "4.57.6", "5.0.0", "5.1.2")
    source = MessageSource("why", ends_only=True)
    chosen = stack_messages.to_read(source, index, {"<5,>=4.56.0", "==4.55.0"})
    # 4.56.2 and 4.57.6: the newest patch of each minor the first spec allows, its two ends;
    # 4.55.0: pinned, read as written; 5.1.2: the newest release
    assert [str(v) for v in chosen] == ["4.55.0", "4.56.2", "4.57.6", "5.1.2"]


def test_every_allowed_minor_without_ends_only_and_newest_from_first():
    index = versions("0.44.0", "0.45.0", "0.45.5", "0.46.1", "0.47.0", "0.48.2")
    chosen = stack_messages.to_read(MessageSource("why", first="0.45.0", newest=2), index, set())
    assert [str(v) for v in chosen] == ["0.47.0", "0.48.2"]
    every = stack_messages.to_read(MessageSource("why"), index, {">=0.46"})
    assert [str(v) for v in every] == ["0.46.1", "0.47.0", "0.48.2"]


def test_torch_is_read_only_for_its_start_up_files():
    torch = stack_messages.MESSAGE_SOURCES["torch"]
    assert torch.keeps("torch/distributed/distributed_c10d.py")
    assert torch.keeps("torch/cuda/__init__.py")
    assert not torch.keeps("torch/_inductor/codegen/triton.py")
    transformers = stack_messages.MESSAGE_SOURCES["transformers"]
    assert transformers.keeps("transformers/models/auto/configuration_auto.py")
    assert transformers.keeps("transformers/models/llama/configuration_llama.py")
    assert not transformers.keeps("transformers/models/llama/modeling_llama.py")
    assert not transformers.keeps("transformers/trainer.py")


HUB_PY = """
class GatedRepoError(Exception):
    pass

def hf_hub_download(repo_id):
    if repo_id.startswith("gated/"):
        raise GatedRepoError(f"Cannot access gated repo for url {repo_id}.")
"""
HUB_CLI_PY = """
def main():
    raise ValueError("a command-line message nobody serving sees")
"""


def hub_wheel(folder: Path, version: str, with_gate: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"huggingface_hub-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("huggingface_hub/__init__.py", "")
        archive.writestr("huggingface_hub/file_download.py", HUB_PY if with_gate else "")
        archive.writestr("huggingface_hub/commands/cli.py", HUB_CLI_PY)
    return path


def test_readings_fold_into_the_stack_catalogue(tmp_path):
    root = tmp_path / "wheels"
    for version, gate in (("0.30.2", True), ("0.33.5", True), ("1.27.0", False)):
        hub_wheel(root / "huggingface-hub", version, gate)
    source = stack_messages.MESSAGE_SOURCES["huggingface-hub"]
    readings = {
        v: stack_messages.read_one(root, "huggingface-hub", v, source, fetch=False, keep=True)
        for v in ("0.30.2", "0.33.5", "1.27.0")
    }
    assert (root / "huggingface-hub" / "messages" / "0.30.2.json").is_file()
    assert not any("command-line" in k for r in readings.values() for k in r["messages"])
    out = tmp_path / "out" / "stack"
    gen.write({}, out, {"huggingface-hub": readings})
    errors = json.loads((out.parent / "stack_errors.json").read_text())
    assert errors["packages"]["huggingface-hub"] == ["0.30.2", "0.33.5", "1.27.0"]
    (span,) = errors["entries"]["GatedRepoError: Cannot access gated repo for url{*}."][
        "huggingface-hub"
    ]
    assert (span["first"], span["last"]) == ("0.30.2", "0.33.5")
    assert span["sites"] == [["huggingface_hub/file_download.py", "hf_hub_download"]]


def test_a_log_states_the_installed_version_in_its_package_lines():
    log = (
        "INFO 08-12 20:26:09 [pynccl.py:113] vLLM is using nccl==2.28.9\n"
        "[pip3] transformers==4.57.1\n"
        "[conda] huggingface-hub           0.35.3       pypi_0    pypi\n"
        "compressed_tensors 0.12.2\n"
        "torch 2 GPUs were found\n"
    )
    assert version_in_log_lines(log, "nccl") == "2.28.9"
    assert version_in_log_lines(log, "transformers") == "4.57.1"
    assert version_in_log_lines(log, "huggingface-hub") == "0.35.3"
    assert version_in_log_lines(log, "compressed-tensors") == "0.12.2"
    assert version_in_log_lines(log, "torch") is None  # "2" is not a version line
    assert version_in_log_lines(log, "ray") is None


def test_the_installed_version_is_judged_against_the_spans_that_raise_it():
    spans = [{"first": "0.30.2", "last": "0.33.5", "sites": []}]
    read = ["0.30.2", "0.33.5", "1.27.0"]
    assert "is in the versions that raise it" in installed_note("0.31.1", spans, read)
    assert "not among the versions that raise it" in installed_note("1.27.0", spans, read)
    assert "newer than the versions read" in installed_note("2.0.0", spans, read)


def test_a_package_without_wheels_is_read_from_its_tags(tmp_path):
    import subprocess

    work = tmp_path / "work"
    (work / "aiter").mkdir(parents=True)

    def git(*args: str, cwd: Path = work) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=cwd,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    (work / "aiter" / "__init__.py").write_text("")
    for version, text in (("0.1.12", "first"), ("0.1.13", "second")):
        (work / "aiter" / "ops.py").write_text(
            f"def f(shape):\n    raise RuntimeError('This GEMM is not supported! {text} path')\n"
        )
        git("add", "-A")
        git("commit", "-q", "-m", version)
        git("tag", f"v{version}")
    git("tag", "v0.1.14-rc1")
    root = tmp_path / "wheels"
    source = MessageSource("why", git=str(work), git_folders=("aiter",), series=3, first="0.1.0")
    tags = stack_messages.git_tags(root, "amd-aiter", source, fetch=True)
    assert [str(v) for v in tags] == ["0.1.12", "0.1.13"]  # the release candidate is not one
    reading = stack_messages.read_one(root, "amd-aiter", "0.1.13", source, fetch=True, keep=False)
    assert "RuntimeError: This GEMM is not supported! second path" in reading["messages"]
    assert not list((root / "amd-aiter").glob("*.zip"))  # the archive is gone once read


def test_explain_names_a_companion_message_with_the_installed_version(tmp_path):
    """transformers' gated-repository message, wrapped in vLLM's engine error, with the
    version the log's own collect-env lines give: the package, its versions that raise the
    message and whether the installed one does."""
    from doctor_forks import doctor_run

    log = tmp_path / "gated.log"
    log.write_text(
        "[pip3] transformers==4.57.1\n"
        "(APIServer pid=1) ERROR 09-01 10:00:00 [api_server.py:100] OSError: "
        "meta-llama/Llama-3.1-8B-Instruct is a gated repository. Make sure to request access at "
        "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct and pass a token having "
        "permission to this repo either by logging in with `hf auth login` or by passing "
        "`token=<your_token>`.\n"
    )
    run = doctor_run("explain", "--log", str(log), "--format", "json", timeout=120)
    assert run.returncode == 1, run.stderr
    found = [
        m for m in json.loads(run.stdout)["package_messages"] if m["package"] == "transformers"
    ]
    assert found, run.stdout
    (message,) = found
    assert "is a gated repository" in message["template"]
    assert message["installed"] == "4.57.1"
    assert message["installed_source"] == "a package line of the log"
    assert message["versions"] and message["installed_note"]
    text = doctor_run("explain", "--log", str(log), timeout=120).stdout
    assert "installed: transformers 4.57.1 (a package line of the log)" in text


def test_the_interpreters_own_wording_names_no_package():
    assert gen.interpreter_wording("AttributeError: module{*}has no attribute{*}")
    assert gen.interpreter_wording("NameError: {*}is not defined")
    assert not gen.interpreter_wording(
        "RuntimeError: Could not find nvcc and default cuda_home='{*}' doesn't exist"
    )
    kept = gen.compact_messages(
        {
            "AttributeError: '{*}' object has no attribute '{*}'": {"sites": [["a/b.py", "f"]]},
            "ValueError: Unsupported quantization method{*}": {"sites": [["a/b.py", "g"]]},
        }
    )
    assert list(kept) == ["ValueError: Unsupported quantization method{*}"]


def test_deep_gemms_host_checks_are_read_from_its_cpp_sources():
    text = """
static void fp8_gemm_nt(const std::pair<torch::Tensor, torch::Tensor>& a, int m) {
    DG_HOST_ASSERT(a.first.scalar_type() == torch::kFloat8_e4m3fn);
    if (arch_major == 9) {
        sm90_fp8_gemm_1d2d(a, m);
    } else {
        DG_HOST_UNREACHABLE("Unsupported architecture or scaling factor types");
    }
}
"""
    assert stack_messages.cpp_checks(text) == [
        (
            "RuntimeError: Assertion error ({*}): a.first.scalar_type() == torch::kFloat8_e4m3fn",
            "fp8_gemm_nt",
        ),
        (
            "RuntimeError: Assertion error ({*}): Unsupported architecture or scaling factor types",
            "fp8_gemm_nt",
        ),
    ]


def test_a_wrapped_or_partial_companion_message_is_read_as_vllms_are():
    """huggingface_hub's offline message wrapped over two log lines, and only its first
    sentence: the package is named either way (the catalogue's matching of vLLM's messages)."""
    from vllm_doctor.engine.logreport import analyse_log

    prefix = "(EngineCore pid=77) ERROR 09-01 10:00:00 [core.py:700] "
    wrapped = (
        f"{prefix}huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate "
        "cached snapshot folder for the specified revision on the local disk and outgoing\n"
        f"{prefix}traffic has been disabled. To enable repo look-ups and downloads online, pass "
        "'local_files_only=False' as input.\n"
    )
    first_sentence = (
        "ERROR: Cannot find an appropriate cached snapshot folder for the specified revision "
        "on the local disk and outgoing traffic has been disabled.\n"
    )
    for log, complete in ((wrapped, True), (first_sentence, False)):
        found = analyse_log(log, []).package_messages
        assert {m.package for m in found} == {"huggingface-hub"}, log
        assert all(m.hit.complete is complete for m in found)
        assert all(m.spans for m in found)


def elf_with_rodata(strings: list[str]) -> bytes:
    """A minimal 64-bit little-endian ELF whose .rodata holds ``strings`` (C strings)."""
    import struct

    rodata = b"\0" + b"".join(s.encode() + b"\0" for s in strings)
    shstrtab = b"\0.rodata\0.shstrtab\0"
    rodata_at = 64
    shstrtab_at = rodata_at + len(rodata)
    shoff = shstrtab_at + len(shstrtab)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, 3, 2)

    def section(name_at: int, sh_type: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQ", name_at, sh_type, 0, 0, offset, size).ljust(64, b"\0")

    sections = section(0, 0, 0, 0) + section(1, 1, rodata_at, len(rodata))
    sections += section(9, 3, shstrtab_at, len(shstrtab))
    return bytes(header) + rodata + shstrtab + sections


CUDART_NAMES = [f"cudaErrorName{n}" for n in range(24)]


def test_a_compiled_librarys_messages_are_read_from_its_rodata():
    """NCCL's WARN formats become templates; the CUDA runtime's error table (the strings among
    the cudaError* names) is the runtime's, left out of NCCL's messages and read for the
    runtime; identifiers, paths and strings that say nothing went wrong are not messages."""
    import binary_messages

    table = [*CUDART_NAMES[:12], "no kernel image is available for execution on the device"]
    table += [*CUDART_NAMES[12:], "CUDA-capable device(s) is/are busy or unavailable"]
    table += ["cudaErrorLast"]
    data = elf_with_rodata(
        [
            "Error while %s shared memory segment %s (size %ld), error: %s (%d)",
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            "ncclCommInitRank",
            "/usr/lib/libnccl-net.so",
            "Using network %s",
            *table,
        ]
    )
    nccl = binary_messages.messages(data, "nccl", "nvidia/nccl/lib/libnccl.so.2")
    assert set(nccl) == {
        "log.error: Error while {*} shared memory segment {*} (size {*}), error: {*} ({*})",
        "log.error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    }
    runtime = binary_messages.messages(data, "cuda-runtime", "lib/libcudart.so.12")
    assert set(runtime) == {
        "log.error: no kernel image is available for execution on the device",
        "log.error: CUDA-capable device(s) is/are busy or unavailable",
    }
    assert runtime["log.error: CUDA-capable device(s) is/are busy or unavailable"]["sites"] == [
        ["lib/libcudart.so.12", "cudaGetErrorString", ""]
    ]
    assert binary_messages.messages(b"not an ELF file at all", "nccl", "x") == {}


def test_a_compiled_library_wheel_is_read_for_its_shared_object(tmp_path):
    source = stack_messages.MESSAGE_SOURCES["nvidia-cuda-runtime-cu12"]
    table = [*CUDART_NAMES, "the provided PTX was compiled with an unsupported toolchain."]
    wheel = (
        tmp_path / "nvidia-cuda-runtime-cu12" / "nvidia_cuda_runtime_cu12-12.8.90-py3-none-any.whl"
    )
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("nvidia/__init__.py", "")
        archive.writestr("nvidia/cuda_runtime/lib/libcudart.so.12", elf_with_rodata([*table, "x"]))
        archive.writestr("nvidia/cuda_runtime/include/cuda.h", "/* not read */")
    reading = stack_messages.read_one(
        tmp_path, "nvidia-cuda-runtime-cu12", "12.8.90", source, fetch=False, keep=True
    )
    assert list(reading["messages"]) == [
        "log.error: the provided PTX was compiled with an unsupported toolchain."
    ]


def test_torch_compiles_raises_count_its_internal_asserts_do_not():
    torch = stack_messages.MESSAGE_SOURCES["torch"]
    assert torch.keeps("torch/_inductor/codecache.py")
    assert torch.keeps_site(
        "InvalidCxxCompiler: No working C++ compiler found in{*}", "torch/_inductor/exc.py"
    )
    assert not torch.keeps_site(
        "AssertionError: Expected GraphModule, got{*}", "torch/_inductor/compile_fx.py"
    )
    # torch.distributed's asserts were catalogued before and still are
    assert torch.keeps_site("AssertionError: {*}", "torch/distributed/distributed_c10d.py")


def test_torchs_pins_choose_the_nccl_and_cuda_runtime_versions_read():
    specs = stack_messages.pinned_specs("nvidia-nccl-cu12", ("torch",))
    assert "==2.27.5" in specs  # torch 2.9-2.10's pin, from stack/torch.json
    assert stack_messages.pinned_specs("nvidia-nccl-cu12", ()) == set()


def test_explain_names_nccl_and_cuda_runtime_messages_from_their_shared_objects(tmp_path):
    """A compiled library's message in a log: NCCL's WARN line (after its `NCCL WARN `
    header) and the CUDA runtime's short error string (after torch's `CUDA error: `) are
    named with the wheels whose shared objects carry them."""
    from doctor_forks import doctor_run

    log = tmp_path / "nccl.log"
    log.write_text(
        "node1:1201:1301 [1] init.cc:904 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 "
        "both on CUDA device 1000\n"
        "torch.AcceleratorError: CUDA error: out of memory\n"
    )
    run = doctor_run("explain", "--log", str(log), "--format", "json", timeout=120)
    found = {(m["package"], m["template"]) for m in json.loads(run.stdout)["package_messages"]}
    assert (
        "nvidia-nccl-cu12",
        "Duplicate GPU detected : rank {*} and rank {*} both on CUDA device {*}",
    ) in found, found
    assert ("nvidia-cuda-runtime-cu12", "out of memory") in found, found
    assert "HW297" in {f["code"] for f in json.loads(run.stdout)["known_failures"]}


def test_an_exception_whose_str_builds_the_message_is_catalogued():
    """Triton's OutOfResources keeps its values in __init__ and words them in __str__: the
    message a log shows is the __str__ template, keyed by the class."""
    import stack_readers

    source = """
class TritonError(Exception):
    pass

class OutOfResources(TritonError):
    def __init__(self, required, limit, name):
        self.required, self.limit, self.name = required, limit, name

    def __str__(self) -> str:
        return (f"out of resource: {self.name}, Required: {self.required}, "
                f"Hardware limit: {self.limit}. Reducing block sizes or `num_stages` may help.")

class Plain:
    def __str__(self):
        return f"not an exception: {self.x} is only printed"
"""
    found = stack_readers.str_messages(source)
    assert [(cls, template) for _kind, cls, template, _func, _cond in found] == [
        (
            "OutOfResources",
            "out of resource:{*}, Required:{*}, Hardware limit:{*}. Reducing block sizes or "
            "`num_stages` may help.",
        )
    ]
