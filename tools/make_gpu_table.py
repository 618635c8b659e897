"""Write vllm_doctor/knowledge/data/gpus.json: the curated GPU table (maintainer tool).

    python tools/make_gpu_table.py

The families below are curated by hand from the sources named in each entry: NVIDIA's CUDA
GPU list (compute capability), the Jetson module pages, AMD's ROCm GPU specifications (gfx
target, memory) and vLLM's ROCm platform (the gfx targets it checks for). Order matters: the
first family whose regex is found in a device name wins, so specific names come first
(``H100 NVL`` before ``H100``, ``RTX PRO 6000`` before Turing's ``RTX 6000``).
"""

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "vllm_doctor" / "knowledge" / "data" / "gpus.json"
NV = "https://developer.nvidia.com/cuda-gpus"
JET = "https://developer.nvidia.com/embedded/jetson-modules"
AMD = "https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html"
VLLM_ROCM = "vllm/platforms/rocm.py (0.33.0): the gfx targets vLLM checks for"
# (match regex, canonical name, arch, capability, memory GiB options, segment)
N = [
    # Blackwell
    (r"\bGB10\b", "GB10 (DGX Spark)", "Blackwell", 121, [128], "workstation"),
    (r"\bGB300\b", "GB300", "Blackwell Ultra", 103, [288], "datacenter"),
    (r"\bB300\b", "B300", "Blackwell Ultra", 103, [288], "datacenter"),
    (r"\bGB200\b", "GB200", "Blackwell", 100, [186], "datacenter"),
    (r"\bB200\b", "B200", "Blackwell", 100, [180, 192], "datacenter"),
    (r"\bB100\b", "B100", "Blackwell", 100, [192], "datacenter"),
    (r"\bThor\b", "Jetson AGX Thor", "Blackwell", 110, [128, 64], "embedded"),
    (r"RTX PRO 6000\b", "RTX PRO 6000 Blackwell", "Blackwell", 120, [96], "workstation"),
    (r"RTX PRO 5000\b", "RTX PRO 5000 Blackwell", "Blackwell", 120, [48, 72], "workstation"),
    (r"RTX PRO 4500\b", "RTX PRO 4500 Blackwell", "Blackwell", 120, [32], "workstation"),
    (r"RTX PRO 4000\b", "RTX PRO 4000 Blackwell", "Blackwell", 120, [24], "workstation"),
    (r"RTX PRO 2000\b", "RTX PRO 2000 Blackwell", "Blackwell", 120, [16], "workstation"),
    (r"RTX 5090\b", "GeForce RTX 5090", "Blackwell", 120, [32], "consumer"),
    (r"RTX 5080\b", "GeForce RTX 5080", "Blackwell", 120, [16], "consumer"),
    (r"RTX 5070 Ti\b", "GeForce RTX 5070 Ti", "Blackwell", 120, [16], "consumer"),
    (r"RTX 5070\b", "GeForce RTX 5070", "Blackwell", 120, [12], "consumer"),
    (r"RTX 5060 Ti\b", "GeForce RTX 5060 Ti", "Blackwell", 120, [16, 8], "consumer"),
    (r"RTX 50[56]0\b", "GeForce RTX 5060 / 5050", "Blackwell", 120, [8], "consumer"),
    # Hopper
    (r"\bGH200\b", "GH200", "Hopper", 90, [96, 144], "datacenter"),
    (r"\bH200\b", "H200", "Hopper", 90, [141], "datacenter"),
    (r"\bH100 NVL\b", "H100 NVL", "Hopper", 90, [94], "datacenter"),
    # the PCIe card has 80 GB only (NVIDIA H100 PCIe product brief PB-11133-001: 80 GB HBM2e);
    # the 94 GB PCIe product is the H100 NVL
    (r"\bH100 PCIe\b", "H100 PCIe", "Hopper", 90, [80], "datacenter"),
    (r"\bH100\b", "H100", "Hopper", 90, [80, 94, 64], "datacenter"),
    (r"\bH800\b", "H800", "Hopper", 90, [80], "datacenter"),
    (r"\bH20\b", "H20", "Hopper", 90, [96, 141], "datacenter"),
    # Ada
    (r"\bL40S\b", "L40S", "Ada Lovelace", 89, [48], "datacenter"),
    (r"\bL40\b", "L40", "Ada Lovelace", 89, [48], "datacenter"),
    (r"\bL20\b", "L20", "Ada Lovelace", 89, [48], "datacenter"),
    (r"\bL4\b", "L4", "Ada Lovelace", 89, [24], "datacenter"),
    (r"\bL2\b", "L2", "Ada Lovelace", 89, [24], "datacenter"),
    (r"RTX 6000 Ada", "RTX 6000 Ada Generation", "Ada Lovelace", 89, [48], "workstation"),
    (r"RTX 5000 Ada", "RTX 5000 Ada Generation", "Ada Lovelace", 89, [32], "workstation"),
    (r"RTX 4500 Ada", "RTX 4500 Ada Generation", "Ada Lovelace", 89, [24], "workstation"),
    (r"RTX 4000 (SFF )?Ada", "RTX 4000 Ada Generation", "Ada Lovelace", 89, [20], "workstation"),
    (r"RTX 2000 (E )?Ada", "RTX 2000 Ada Generation", "Ada Lovelace", 89, [16], "workstation"),
    (r"RTX 4090\b", "GeForce RTX 4090 (and 4090 D)", "Ada Lovelace", 89, [24], "consumer"),
    (r"RTX 4080\b", "GeForce RTX 4080", "Ada Lovelace", 89, [16], "consumer"),
    (r"RTX 4070 Ti SUPER\b", "GeForce RTX 4070 Ti SUPER", "Ada Lovelace", 89, [16], "consumer"),
    (r"RTX 4070\b", "GeForce RTX 4070 / 4070 Ti", "Ada Lovelace", 89, [12], "consumer"),
    (r"RTX 4060 Ti\b", "GeForce RTX 4060 Ti", "Ada Lovelace", 89, [8, 16], "consumer"),
    (r"RTX 40[56]0\b", "GeForce RTX 4060 / 4050", "Ada Lovelace", 89, [8, 6], "consumer"),
    # Ampere
    (r"\bA100\b", "A100", "Ampere", 80, [40, 80], "datacenter"),
    (r"\bA800\b", "A800", "Ampere", 80, [40, 80], "datacenter"),
    (r"\bA30\b", "A30", "Ampere", 80, [24], "datacenter"),
    (r"\bOrin\b", "Jetson Orin (AGX, NX, Nano)", "Ampere", 87, [64, 32, 16, 8, 4], "embedded"),
    (r"RTX A6000\b", "RTX A6000", "Ampere", 86, [48], "workstation"),
    (r"RTX A5500\b", "RTX A5500", "Ampere", 86, [24], "workstation"),
    (r"RTX A5000\b", "RTX A5000", "Ampere", 86, [24], "workstation"),
    (r"RTX A4500\b", "RTX A4500", "Ampere", 86, [20], "workstation"),
    (r"RTX A4000\b", "RTX A4000", "Ampere", 86, [16], "workstation"),
    (r"RTX A2000\b", "RTX A2000", "Ampere", 86, [6, 12], "workstation"),
    (r"\bA10G\b", "A10G", "Ampere", 86, [24], "datacenter"),
    (r"\bA10\b", "A10", "Ampere", 86, [24], "datacenter"),
    (r"\bA40\b", "A40", "Ampere", 86, [48], "datacenter"),
    (r"\bA16\b", "A16", "Ampere", 86, [16], "datacenter"),
    (r"\bA2\b", "A2", "Ampere", 86, [16], "datacenter"),
    (r"RTX 3090\b", "GeForce RTX 3090 / 3090 Ti", "Ampere", 86, [24], "consumer"),
    (r"RTX 3080 Ti\b", "GeForce RTX 3080 Ti", "Ampere", 86, [12], "consumer"),
    (r"RTX 3080\b", "GeForce RTX 3080", "Ampere", 86, [10, 12], "consumer"),
    (r"RTX 3070\b", "GeForce RTX 3070 / 3070 Ti", "Ampere", 86, [8], "consumer"),
    (r"RTX 3060 Ti\b", "GeForce RTX 3060 Ti", "Ampere", 86, [8], "consumer"),
    (r"RTX 3060\b", "GeForce RTX 3060", "Ampere", 86, [12, 8], "consumer"),
    (r"RTX 3050\b", "GeForce RTX 3050", "Ampere", 86, [8, 6], "consumer"),
    # Turing
    (r"\bT4\b", "T4", "Turing", 75, [16], "datacenter"),
    (r"TITAN RTX\b", "TITAN RTX", "Turing", 75, [24], "consumer"),
    (r"(Quadro )?RTX 8000\b", "Quadro RTX 8000", "Turing", 75, [48], "workstation"),
    (r"(Quadro )?RTX 6000\b", "Quadro RTX 6000", "Turing", 75, [24], "workstation"),
    (r"(Quadro )?RTX 5000\b", "Quadro RTX 5000", "Turing", 75, [16], "workstation"),
    (r"(Quadro )?RTX 4000\b", "Quadro RTX 4000", "Turing", 75, [8], "workstation"),
    (r"\bT(1000|600|400)\b", "T1000 / T600 / T400", "Turing", 75, [8, 4, 2], "workstation"),
    (r"RTX 2080\b", "GeForce RTX 2080 / 2080 SUPER / 2080 Ti", "Turing", 75, [8, 11], "consumer"),
    (r"RTX 2070\b", "GeForce RTX 2070", "Turing", 75, [8], "consumer"),
    (r"RTX 2060\b", "GeForce RTX 2060", "Turing", 75, [6, 8, 12], "consumer"),
    (r"GTX 16[56]0\b", "GeForce GTX 1660 / 1650", "Turing", 75, [6, 4], "consumer"),
    # Volta
    (r"\bXavier\b", "Jetson Xavier (AGX, NX)", "Volta", 72, [64, 32, 16, 8], "embedded"),
    (r"\bV100S?\b", "V100 / V100S", "Volta", 70, [16, 32], "datacenter"),
    (r"\bGV100\b", "Quadro GV100", "Volta", 70, [32], "workstation"),
    (r"TITAN V\b", "TITAN V", "Volta", 70, [12, 32], "consumer"),
    # Pascal
    (r"\bP100\b", "P100", "Pascal", 60, [16, 12], "datacenter"),
    (r"\bGP100\b", "Quadro GP100", "Pascal", 60, [16], "workstation"),
    (r"\bTX2\b|Tegra X2", "Jetson TX2", "Pascal", 62, [8, 4], "embedded"),
    (r"\bP40\b", "P40", "Pascal", 61, [24], "datacenter"),
    (r"\bP4\b", "P4", "Pascal", 61, [8], "datacenter"),
    (r"\bP6\b", "P6", "Pascal", 61, [16], "datacenter"),
    (
        r"Quadro P(6000|5000|4000|2200|2000|1000|620|400)\b",
        "Quadro P series",
        "Pascal",
        61,
        [24, 16, 8, 5, 4, 2],
        "workstation",
    ),
    (r"TITAN Xp?\b", "TITAN X (Pascal) / TITAN Xp", "Pascal", 61, [12], "consumer"),
    (
        r"GTX 10[5-8]0\b|GT 1030\b",
        "GeForce GTX 10 series",
        "Pascal",
        61,
        [11, 8, 6, 4, 3, 2],
        "consumer",
    ),
    # before Pascal: vLLM does not run there, kept so that old names still resolve
    (r"\bM10\b", "Tesla M10", "Maxwell", 50, [32], "datacenter"),
    (
        r"\bM(60|40|6|4)\b",
        "Tesla M60 / M40 / M6 / M4",
        "Maxwell",
        52,
        [16, 24, 12, 8, 4],
        "datacenter",
    ),
    (r"\bK80\b", "Tesla K80", "Kepler", 37, [24], "datacenter"),
]
A = [
    (r"MI355X?\b|MI350X?\b", "Instinct MI350X / MI355X", "CDNA 4", "gfx950", [288], "datacenter"),
    (r"MI325X?\b", "Instinct MI325X", "CDNA 3", "gfx942", [256], "datacenter"),
    (r"MI308X?\b", "Instinct MI308X", "CDNA 3", "gfx942", [192], "datacenter"),
    (r"MI300A\b", "Instinct MI300A", "CDNA 3", "gfx942", [128], "datacenter"),
    (r"MI300X?\b", "Instinct MI300X", "CDNA 3", "gfx942", [192], "datacenter"),
    (r"MI250X?\b", "Instinct MI250 / MI250X", "CDNA 2", "gfx90a", [128], "datacenter"),
    (r"MI210\b", "Instinct MI210", "CDNA 2", "gfx90a", [64], "datacenter"),
    (r"RX[ _]?7900[ _]?XTX\b", "Radeon RX 7900 XTX", "RDNA 3", "gfx1100", [24], "consumer"),
    (r"RX[ _]?7900 ?XT\b", "Radeon RX 7900 XT", "RDNA 3", "gfx1100", [20], "consumer"),
    (r"RX[ _]?7900[ _]?GRE\b", "Radeon RX 7900 GRE", "RDNA 3", "gfx1100", [16], "consumer"),
    (r"PRO[ _]W7900\b", "Radeon PRO W7900", "RDNA 3", "gfx1100", [48], "workstation"),
    (r"PRO[ _]W7800\b", "Radeon PRO W7800", "RDNA 3", "gfx1100", [32, 48], "workstation"),
    (
        r"RX[ _]?7800 ?XT\b|RX ?7700 ?XT\b",
        "Radeon RX 7800 XT / 7700 XT",
        "RDNA 3",
        "gfx1101",
        [16, 12],
        "consumer",
    ),
    (r"PRO[ _]W7700\b", "Radeon PRO W7700", "RDNA 3", "gfx1101", [16], "workstation"),
    (r"Radeon[ _]?890M\b", "Radeon 890M (Strix Point)", "RDNA 3.5", "gfx1150", [], "embedded"),
    (r"Radeon[ _]?8060S\b", "Radeon 8060S (Strix Halo)", "RDNA 3.5", "gfx1151", [], "embedded"),
    (r"R9700\b", "Radeon AI PRO R9700", "RDNA 4", "gfx1201", [32], "workstation"),
    (r"RX[ _]?9070", "Radeon RX 9070 / 9070 XT", "RDNA 4", "gfx1201", [16], "consumer"),
    (r"RX[ _]?9060", "Radeon RX 9060 XT", "RDNA 4", "gfx1200", [16, 8], "consumer"),
]
# How people write each family (``--gpu 4090``, ``--gpu "RTX 4090"``, completion, ``--gpu
# list``): derived from the family's name (``GeForce`` dropped, ``/`` alternatives spelled out,
# the parenthesis left out), except where the name is a description rather than a product.
SPELLINGS = {
    "GB10 (DGX Spark)": ["GB10"],
    "GeForce RTX 4090 (and 4090 D)": ["RTX 4090", "RTX 4090 D"],
    "Jetson Orin (AGX, NX, Nano)": ["Jetson AGX Orin", "Jetson Orin NX", "Jetson Orin Nano"],
    "Jetson Xavier (AGX, NX)": ["Jetson AGX Xavier", "Jetson Xavier NX"],
    "Jetson AGX Thor": ["Jetson AGX Thor", "Thor"],
    "RTX PRO 6000 Blackwell": ["RTX PRO 6000"],
    "RTX PRO 5000 Blackwell": ["RTX PRO 5000"],
    "RTX PRO 4500 Blackwell": ["RTX PRO 4500"],
    "RTX PRO 4000 Blackwell": ["RTX PRO 4000"],
    "RTX PRO 2000 Blackwell": ["RTX PRO 2000"],
    "RTX 6000 Ada Generation": ["RTX 6000 Ada"],
    "RTX 5000 Ada Generation": ["RTX 5000 Ada"],
    "RTX 4500 Ada Generation": ["RTX 4500 Ada"],
    "RTX 4000 Ada Generation": ["RTX 4000 Ada"],
    "RTX 2000 Ada Generation": ["RTX 2000 Ada"],
    "Quadro P series": ["Quadro P6000", "Quadro P5000", "Quadro P4000", "Quadro P2000"],
    "GeForce GTX 10 series": ["GTX 1080 Ti", "GTX 1080", "GTX 1070", "GTX 1060", "GT 1030"],
    "TITAN X (Pascal) / TITAN Xp": ["TITAN X", "TITAN Xp"],
    "Radeon 890M (Strix Point)": ["Radeon 890M"],
    "Radeon 8060S (Strix Halo)": ["Radeon 8060S"],
}


def spellings(name: str) -> list[str]:
    """The ways a family is written: ``GeForce RTX 3090 / 3090 Ti`` → RTX 3090, RTX 3090 Ti;
    ``Instinct MI300X`` → MI300X (and the full name)."""
    if name in SPELLINGS:
        return SPELLINGS[name]
    first, *others = [part.strip() for part in name.split(" / ")]
    words = first.removeprefix("GeForce ").split()
    out = [" ".join(words)]
    number = next((i for i, w in enumerate(words) if w[0].isdigit()), len(words) - 1)
    for other in others:
        # "3090 Ti" after "RTX 3090" replaces the model number and what follows it;
        # "V100S" after "V100" is whole
        if other[0].isdigit():
            out.append(" ".join([*words[:number], other]))
        elif len(words) > 1 and " " not in other:
            out.append(" ".join([*words[:-1], other]))
        else:
            out.append(other)
    for prefix in ("Instinct ", "Tesla ", "Radeon "):  # MI300X, M60, RX 7900 XTX too
        out += [s.removeprefix(prefix) for s in out if s.startswith(prefix)]
    return out


entries = []
for m, name, arch, cap, mem, seg in N:
    src = JET if seg == "embedded" else NV
    entries.append(
        {
            "match": m,
            "name": name,
            "vendor": "nvidia",
            "arch": arch,
            "capability": cap,
            "memory_gib": mem,
            "segment": seg,
            "spellings": spellings(name),
            "source": src,
        }
    )
for m, name, arch, gfx, mem, seg in A:
    entries.append(
        {
            "match": m,
            "name": name,
            "vendor": "amd",
            "arch": arch,
            "gfx": gfx,
            "memory_gib": mem,
            "segment": seg,
            "spellings": spellings(name),
            "source": AMD,
        }
    )
data = {
    "kind": "gpus",
    "format": 1,
    "meaning": (
        "GPU families, most specific first: match is a case-insensitive regex searched in "
        "the device name (NVML, torch, collect-env); capability is NVIDIA's compute "
        "capability as vLLM writes it (major*10+minor); gfx is the AMD target; memory_gib "
        "the memory sizes the family ships with (nominal, not what NVML reports); spellings how "
        "people write it (--gpu, completion, --gpu list), each resolving to the family"
    ),
    "sources": {"nvidia": NV, "jetson": JET, "amd": AMD, "amd_targets": VLLM_ROCM},
    "amd_targets": [
        "gfx90a",
        "gfx942",
        "gfx950",
        "gfx1100",
        "gfx1101",
        "gfx1150",
        "gfx1151",
        "gfx1200",
        "gfx1201",
        "gfx1250",
    ],
    "families": entries,
}
lines = json.dumps({k: v for k, v in data.items() if k != "families"}, indent=1)[:-2]
body = ",\n".join("  " + json.dumps(e, separators=(", ", ": ")) for e in entries)
out = lines + ',\n "families": [\n' + body + "\n ]\n}\n"
json.loads(out)
OUT.write_text(out)
print(len(entries))
