"""Performance faults: correct, but slow (the field's phenomenon D)."""

from __future__ import annotations

from ..basics.recipes import Set
from ..evidence.signatures import Condition as C
from ..evidence.signatures import Signature
from .fault import Chinese, Fault

SLOW_DATA = Fault(
    name="slow_data",
    title="Data loading dominates the step (per-sample Python parsing)",
    family="performance", task="tabular", shape="healthy", phenomenon="D",
    symptom="The loss curve is bitwise identical to the baseline's, but each step "
            "takes several times longer and most of it is spent waiting for the "
            "batch.",
    cause="Each sample is parsed from a text line and standardised in Python, one "
          "at a time, then collated. For a model this small the per-sample Python "
          "work costs more than the forward, backward and optimizer step together.",
    experiment="Time the four segments of a step: data loading is the largest. "
               "Preprocess once, vectorised, and the data share falls to the "
               "baseline's while the losses stay bitwise identical.",
    fix="Parse and standardise the whole dataset once (vectorised) and index "
        "batches from tensors; for expensive per-sample work use DataLoader workers "
        "and prefetching.",
    zh=Chinese(
        title="数据加载占据了每一步的大部分时间（逐样本的 Python 解析）",
        symptom="损失曲线与基线逐位 (bitwise) 相同，但每一步要花好几倍的时间，而且大部分时间花在等待批次"
                "上。",
        cause="每个样本都在 Python 里逐个从一行文本解析并标准化，然后再拼成批次。对这么小的模型来说，逐样"
              "本的 Python 工作比前向、反向和优化器步骤加起来还费时。",
        experiment="给一步中的四个阶段计时：数据加载最大。只做一次向量化的预处理，数据所占的份额就降到基"
                   "线的水平，而损失仍逐位相同。",
        fix="把整个数据集一次性（向量化地）解析并标准化，直接从张量里索引批次；对于代价高的逐样本处理，使"
            "用 DataLoader 的 workers 和预取 (prefetching)。"),
    edit=(Set("loader", "per_sample"),),
    repair=(Set("loader", "batched"),),
    probe=(Set("loader", "batched"),),
    signature=Signature((
        C("data_time_share", ">=", 0.4, "median share of the step spent loading data",
          "the largest of the four segments; the vectorised loader takes ~15%",
          log=False, unit=0.1,
          label_zh="每步中数据加载所占份额的中位数",
          why_zh="四段中最大的一段；向量化的加载器约占 15%"),
    ), "the model waits for data most of each step - speed up the input pipeline",
       verdict_zh="模型在每一步的大部分时间都在等数据：加快输入流水线"),
    outcome=Signature((
        C("data_time_share", "<=", 0.3, "median share of the step spent loading data",
          "vectorised loading is a minor part of the step", log=False, unit=0.1,
          label_zh="每步中数据加载所占份额的中位数",
          why_zh="向量化的加载只占每步的一小部分"),
    ), "vectorised loading removes the bottleneck",
       verdict_zh="向量化的加载消除了瓶颈"),
)

FAULTS = (SLOW_DATA,)
