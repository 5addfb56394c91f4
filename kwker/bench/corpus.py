"""The benchmark corpus: real ML call sites of torch's sorting and selection ops
(catalogue.json, shipped with the package), their input values and their calls."""
import contextlib
import json
import math
import zlib
from dataclasses import dataclass
from importlib import resources
from typing import Callable, Dict, List, Optional, Tuple

import torch

from .dists import GENERATORS
from .layers_reference import median_pool2d_reference

CATALOGUE_FILE = "catalogue.json"

# Layers are benchmarked as their plain-torch recipe, with and without Kwker installed.
LAYER_REFERENCES: Dict[str, Callable] = {"median_pool2d": median_pool2d_reference}

# --quick's representative subset: every op, each dtype, the value properties that
# change the algorithms (bf16 ties, -inf blocks, NaN rows, nearly sorted keys, few
# distinct ints, tiny rows, a >= 1M sort for the radix bound) and one layer, each
# input fast enough for the whole run to take well under a minute on 2 cores.
QUICK_IDS = (
    "hf_topk_warper__llama3_8b",
    "gptfast_topk_bf16__llama2_7b",
    "quest_page_topk__longchat_7b_32k",
    "qwen3_moe_router_top8__30b_a3b",
    "dsv3_gate_expert_top8",
    "timm_accuracy_top5__in1k",
    "hf_topp_after_topk__llama2_7b_chat",
    "tv_nms_sort_scores__retinanet",
    "hf_grouped_mm_sort_expert_ids__qwen3_30b",
    "pyg_temporal_sort_by_time__wikipedia",
    "pyg_coalesce_sort__ogbn_arxiv",
    "lnets_groupsort_g4",
    "tabnet_sparsemax_sort__covertype",
    "mae_random_masking_shuffle__vit_b16",
    "megatron_permute_argsort__mixtral",
    "torchmetrics_binary_prc_argsort",
    "kornia_disk_kthvalue_threshold",
    "smoothed_value_median_window20",
    "kornia_median_blur_3x3__rgb256",
    "lagllama_robust_scaler_nanmedian",
    "lagllama_robust_scaler_nanquantile_q1",
    "torch_ao_model_report_quantile",
    "chronos_sample_quantile__t5_small",
    "hf_repetition_penalty_unique__llama3",
    "torchmetrics_spearman_rank_unique",
    "pyg_neighbor_sampler_unique__products",
    "timm_median_pool2d_3x3__rgb224",
)


@dataclass(frozen=True)
class Entry:
    """One catalogue input: a call site (op, args) and the values it sees."""
    id: str
    op: str
    args: dict
    shape: Tuple[int, ...]
    dtype: torch.dtype
    dist: str
    params: dict
    desc: str
    kind: str
    source: str
    model: str
    note: str

    @classmethod
    def from_json(cls, record: dict) -> "Entry":
        fields = dict(record, shape=tuple(record["shape"]), dtype=getattr(torch, record["dtype"]))
        return cls(**fields)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_layer(self) -> bool:
        return self.op in LAYER_REFERENCES

    @property
    def seed(self) -> int:
        """Derived from the id, so an input is the same on every run and machine."""
        return zlib.crc32(self.id.encode("utf-8"))

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")


def load_catalogue() -> List[Entry]:
    text = resources.files(__package__).joinpath(CATALOGUE_FILE).read_text(encoding="utf-8")
    return [Entry.from_json(record) for record in json.loads(text)]


def select(entries: List[Entry], quick: bool = False, substring: Optional[str] = None) -> List[Entry]:
    """The entries to run: those whose id or op contains `substring` if given (from the
    whole catalogue), else the quick subset with `quick`, else all."""
    if substring:
        return [e for e in entries if substring in e.id or substring in e.op]
    if quick:
        return [e for e in entries if e.id in QUICK_IDS]
    return list(entries)


@contextlib.contextmanager
def one_thread():
    """torch on one thread inside the block, its thread count restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def make_input(entry: Entry) -> torch.Tensor:
    """The entry's input tensor, identical on every call."""
    with one_thread():  # matmul and reduction results can depend on the thread count
        return GENERATORS[entry.dist](entry.shape, entry.dtype, entry.params, entry.seed)


# A repeated input is not what a call site sees, and the CPU learns it: branch
# predictors (measured on an AMD Zen 4) remember the outcomes of tens of thousands
# of comparisons, so torch's branchy sorts run several times faster on an input
# timed over and over than on fresh ones of the same kind (torch.sort of one
# randn row of 1000: 13.6 us repeated, 53 us over new rows; topk(k=2) of 4096x8
# 104 -> 296 us; kthvalue of 512 5.4 -> 10.6 us).  So each timed call cycles
# through variants: inputs from the same generator with the next seeds, enough
# of them to hold VARIANT_ELEMENTS elements together (the effect was gone by
# 2^15..2^17 elements in those measurements; inputs of 2^17 elements and more
# are timed alone, as before).
VARIANT_ELEMENTS = 1 << 17
MAX_VARIANTS = 1024


def variant_count(numel: int) -> int:
    """How many inputs a timed call of `numel` elements cycles through."""
    return max(1, min(MAX_VARIANTS, -(-VARIANT_ELEMENTS // max(numel, 1))))


def make_variants(entry: Entry, count: Optional[int] = None) -> List[torch.Tensor]:
    """make_input's tensor, then more from the same generator with the following seeds:
    `count` in all (variant_count of the entry's size by default)."""
    count = variant_count(entry.numel) if count is None else count
    with one_thread():
        return [make_input(entry)] + [
            GENERATORS[entry.dist](entry.shape, entry.dtype, entry.params, entry.seed + i)
            for i in range(1, count)]


def build_call(entry: Entry, x: Optional[torch.Tensor] = None):
    """(fn_name, args, kwargs) of the entry's call on its input `x` (made if not given):
    torch.<fn_name>(*args, **kwargs), or for a layer its reference in LAYER_REFERENCES."""
    if x is None:
        x = make_input(entry)
    kwargs = dict(entry.args)
    if isinstance(kwargs.get("q"), list):
        kwargs["q"] = torch.tensor(kwargs["q"], dtype=x.dtype)  # torch wants q as a tensor of x's dtype
    return entry.op, (x,), kwargs


def resolve(fn_name: str) -> Callable:
    """The function a call runs now: the current torch.<fn_name> (Kwker's while it is
    installed, torch's otherwise), or the layer reference, which calls into torch."""
    if fn_name in LAYER_REFERENCES:
        return LAYER_REFERENCES[fn_name]
    return getattr(torch, fn_name)
