"""What a person reads: the verdict in the course's four columns (symptom, cause, the
distinguishing experiment actually run, fix), then each experiment; as text, as a
DataFrame, and as an HTML page with each arm's loss beside the baseline's."""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

import pandas as pd

from .. import catalogue
from ..basics.files import atomic_write
from ..basics.text import Text
from ..basics.text import language as _language
from ..catalogue.fault import COLUMN_NAMES
from ..evidence import shapes
from ..evidence.experiments import CLEAR, SAME
from .arms import ARMS

T = {
    "title": Text("Investigation of your training loop", "对你的训练循环的调查"),
    **COLUMN_NAMES,
    "healthy": Text("healthy: no experiment found a fault", "健康：没有实验发现故障"),
    "cut": Text("the loss looks healthy, but {none} of {n} trainable tensors get no gradient "
                "(a graph cut by .detach(), an unused layer?): no catalogue cause fits",
                "损失看起来健康，但 {n} 个可训练张量中有 {none} 个得不到梯度（被 .detach() 切断的计算图？"
                "没用到的层？）：目录中没有相符的原因"),
    "no_cause": Text("unhealthy, no catalogue cause fits", "不健康，目录中没有相符的原因"),
    "over_batch": Text("unhealthy whatever the loss shows: the output is normalised across the "
                       "batch (dim 0), not the classes; no catalogue cause fits",
                       "无论损失看起来如何都不健康：输出是在批次维 (dim 0) 上归一化的，而不是类别维；"
                       "目录中没有相符的原因"),
    "unregistered": Text("the model keeps {k} tensor(s) that ask for a gradient but are no "
                         "nn.Parameter ({names}): model.parameters() never lists them, so "
                         "no optimizer trains them",
                         "模型保存了 {k} 个要求梯度却不是 nn.Parameter 的张量（{names}）："
                         "model.parameters() 从不列出它们，所以没有优化器会训练它们"),
    "no_experiment": Text("none decided it", "没有实验能下结论"),
    "no_fix": Text("see what the experiments showed below", "见下面各实验的结果"),
    "passive_only": Text("{title} (from the passive reading: no experiment here confirmed it)",
                         "{title}（来自被动诊断：这里没有实验证实它）"),
    "ran": Text("{changes}: {effect}", "{changes}：{effect}"),
    "confidence": Text("confidence: {level}", "置信度：{level}"),
    "experiments": Text("experiments (final loss = mean of the last 20% of steps; spread = "
                        "range of {of} over 3 seeds = {spread:.3g}; effect = (baseline - arm) / "
                        "spread)",
                        "实验（最终损失 = 最后 20% 步的平均；离散度 = 3 个种子的{of}的极差 = "
                        "{spread:.3g}；效应 = (基线 - 实验) / 离散度）"),
    "log": Text("log(final loss)", "log(最终损失)"), "linear": Text("final loss", "最终损失"),
    "hypotheses": Text("hypotheses", "假设"),
    "experiments_short": Text("experiments", "实验"),
    "row": Text("final loss {loss:.4g}{effect}: {conclusion}", "最终损失 {loss:.4g}{effect}：{conclusion}"),
    "effect": Text(", effect {value:+.2f}", "，效应 {value:+.2f}"),
    "hyp_heads": Text("hypothesis|from|status|deciding outcome",
                      "假设|来源|状态|决定性的结果"),
    "from_diagnosis": Text("passive diagnosis", "被动诊断"),
    "from_shape": Text("the shape's usual suspect", "该曲线形状的常见原因"),
    "from_premise": Text("a check saw its mechanism", "检查看到了它的机制"),
    "why_specific": Text("why: its experiment confirmed it, and no other experiment or "
                         "hypothesis fits as well", "理由：它的实验证实了它，并且没有其他实验或假设同样相符"),
    "why_twins": Text("why not higher: the same experiments also confirm {names}: they cannot "
                      "tell these apart", "为何不更高：同样的实验也证实了 {names}：无法把它们区分开"),
    "why_rivals": Text("why not higher: another change helps as well ({arms}): something here is "
                       "wrong, the experiments do not single out which",
                       "为何不更高：另一个改动同样有帮助（{arms}）：这里确有问题，但实验没有指明是哪一个"),
    "why_passive": Text("why: the passive reading's cause, which no experiment refuted",
                        "理由：被动诊断给出的原因，没有实验排除它"),
    "why_passive_unsupported": Text("why low: the passive reading's cause; the experiment meant "
                                    "to confirm it ran and did not show it",
                                    "为何低：被动诊断给出的原因；本应证实它的实验运行了，却没有显示出来"),
    "why_untested": Text("why low: the passive reading's cause, which no experiment confirmed",
                         "为何低：被动诊断给出的原因，没有实验证实它"),
    "why_suggested": Text("why low: only the curve's shape suggested it, and only an effect "
                          "supports it: a change that helps is not yet its cause",
                          "为何低：只有曲线形状提示了它，也只有一个效果支持它：有帮助的改动还不等于它的原因"),
    "also": Text("also consistent with the same experiments: {names}",
                 "同样与这些实验相符：{names}"),
    "reproducible": Text("same seed twice: bitwise identical", "同一种子运行两次：逐位相同"),
    "not_reproducible": Text("same seed twice: the losses differ (the loop is not "
                             "deterministic; the spread includes that)",
                             "同一种子运行两次：损失不同（循环不确定；离散度已包含这一点）"),
    "flow": Text("gradient flow (one step): {none} of {n} trainable tensors got no gradient{names}; "
                 "{unopt} had a gradient the optimizer does not hold",
                 "梯度流（一步）：{n} 个可训练张量中有 {none} 个没有得到梯度{names}；"
                 "{unopt} 个有梯度但不在优化器里"),
    "samples_mixed": Text("the model mixes samples: changing one sample of a batch moves the "
                          "outputs of others (a reshape or a time-major/batch-major mix-up?)",
                          "模型把样本混在了一起：改变批次中的一个样本，其他样本的输出也跟着变"
                          "（reshape 或时间维/批次维弄混了？）"),
    "normalised_over_batch": Text("the output is normalised across the batch (a softmax or "
                                  "log-softmax over dim 0, not over the classes): each "
                                  "sample's prediction depends on the others in its batch; "
                                  "no catalogue fault has that mechanism",
                                  "输出是在批次维上归一化的（softmax 或 log-softmax 作用在 dim 0 "
                                  "上，而不是类别维）：每个样本的预测都依赖批次里的其他样本；"
                                  "目录中没有哪个故障具有这种机制"),
    "nonfinite_inputs": Text("data: {share:.0%} of the training batches hold NaN/Inf inputs",
                             "数据：{share:.0%} 的训练批次的输入含有 NaN/Inf"),
}
CONCLUSION = {
    "better": Text("clearly lower loss", "损失明显更低"),
    "worse": Text("clearly higher loss", "损失明显更高"),
    "same": Text("no difference beyond the spread", "差异没有超出离散度"),
    "between": Text("lower or higher, but not clearly", "有高有低，但不明显"),
    "seed": Text("measures the spread", "用来测量离散度"),
    "skipped": Text("does not apply to these parts", "不适用于这些部件"),
    "error": Text("ended by an error", "因错误而中止"),
}
STATUS = {"confirmed": Text("confirmed", "已证实"), "refuted": Text("refuted", "已排除"),
          "not supported": Text("not supported", "未得到支持"),
          "not tested": Text("not tested", "未检验"), "undecided": Text("undecided", "未定")}
CONFIDENCE = {"high": Text("high", "高"), "medium": Text("medium", "中"), "low": Text("low", "低")}
EXPECT = {"better": Text("{arm}: clearly lower loss", "{arm}：损失明显更低"),
          "worse": Text("{arm}: clearly higher loss", "{arm}：损失明显更高"),
          "unchanged": Text("{arm}: no change", "{arm}：没有变化"),
          "not_worse": Text("{arm}: not worse", "{arm}：没有变差"),
          "present": Text("{arm}: found", "{arm}：存在"),
          "absent": Text("{arm}: none", "{arm}：不存在"),
          "all": Text("{arm}: all of them", "{arm}：全部")}


def language(lang: str | None) -> str:
    return _language(lang)


def conclusion(name: str, run, effect: float) -> str:
    """The conclusion key of one arm's row."""
    if run.skipped:
        return "skipped"
    if name.startswith("reseed") or name in ("baseline", "repeat"):
        return "seed"
    if effect != effect:
        return "error" if run.error else "same"
    if effect > CLEAR:
        return "better"
    if effect < -CLEAR:
        return "worse"
    return "same" if abs(effect) < SAME else "between"


def table(runs: dict, ends: dict, effects: dict, spread: float, judgements: list,
          lang: str | None) -> pd.DataFrame:
    """One row per arm: what changed, its final loss, the measured effect, the spread,
    the conclusion, and the hypotheses it confirmed or refuted."""
    rows = []
    for name in ARMS:
        if name not in runs:
            continue
        run = runs[name]
        effect = effects.get(f"gain[{name}]", math.nan)
        decided = [f"{j.fault}: {STATUS[j.status].say(lang)}" for j in judgements
                   if j.outcome is not None and j.outcome.arm == name]
        key = conclusion(name, run, effect)
        rows.append({"arm": name, "changed": ARMS[name].changes.say(lang),
                     "steps": len(run.history), "final_loss": ends.get(name, math.nan),
                     "effect": effect, "spread": spread,
                     "outcome": key, "conclusion": CONCLUSION[key].say(lang)
                     + (f" ({run.error})" if run.error else ""),
                     "decides": "; ".join(decided), "seconds": round(run.seconds, 2)})
    return pd.DataFrame(rows)


def verdict_columns(inv, lang: str) -> dict[str, str]:
    """The course's four columns for this investigation."""
    d = inv.diagnosis
    symptom = f"{shapes.name(d.shape, lang)} - {d.shape_evidence}"
    if inv.top is None:
        cause = T["healthy" if inv.healthy else "no_cause"].say(lang)
        if inv.effects.get("normalised_over_batch") == 1.0:
            cause = T["over_batch"].say(lang)
        if inv.healthy and inv.flow is not None and inv.flow.without_grad:
            cause = T["cut"].say(lang, none=len(inv.flow.without_grad), n=inv.flow.trainable)
        elif inv.healthy and inv.flow is not None and inv.flow.unregistered:
            cause = _unregistered(inv.flow, lang)
        experiment, fix = _strongest_effect(inv, lang), T["no_fix"].say(lang)
        return {"symptom": symptom, "cause": cause, "experiment": experiment, "fix": fix}
    fault = catalogue.FAULTS[inv.top]
    j = next((j for j in inv.judgements if j.fault == inv.top), None)
    title = f"{inv.top}: {fault.text('title', lang)}"
    if j is None or j.status != "confirmed":
        cause = T["passive_only"].say(lang, title=title)
        experiment = fault.text("experiment", lang) + " " + (
            _said_not_run(lang) if j is None or j.status in ("not tested", "undecided")
            else Text("(run here: it did not show it)", "（这里运行了：没有显示出来）").say(lang))
    else:
        cause = title
        experiment = _outcome_line(j.outcome, j.value, inv, lang)
    return {"symptom": symptom, "cause": cause, "experiment": experiment,
            "fix": fault.text("fix", lang)}


def _said_not_run(lang) -> str:
    return Text("(not run: no experiment here changes that factor)",
                "（未运行：这里没有能改变该因素的实验）").say(lang)


def _outcome_line(outcome, value, inv, lang) -> str:
    arm = outcome.arm
    if arm in ARMS:
        changes = ARMS[arm].changes.say(lang)
        return T["ran"].say(lang, changes=changes, effect=_effect_words(value, lang))
    return EXPECT[outcome.expect].say(lang, arm=arm) + f" ({value:.2g})"


def _effect_words(value: float, lang) -> str:
    if value == math.inf:
        return Text("the run no longer breaks (finite loss where the baseline's was not)",
                    "运行不再崩溃（基线出现非有限损失，这里没有）").say(lang)
    if value == -math.inf:
        return Text("the run breaks (non-finite loss)", "运行崩溃（非有限损失）").say(lang)
    return Text("final loss {value:+.1f} spreads against the baseline",
                "最终损失比基线低 {value:+.1f} 个离散度").say(lang, value=value)


def _strongest_effect(inv, lang) -> str:
    rows = inv.experiments
    if rows.empty:
        return T["no_experiment"].say(lang)
    rows = rows[rows["effect"].notna()]
    if rows.empty:
        return T["no_experiment"].say(lang)
    best = rows.loc[rows["effect"].abs().idxmax()]
    if abs(best["effect"]) <= CLEAR:
        return T["no_experiment"].say(lang)
    return T["ran"].say(lang, changes=best["changed"], effect=_effect_words(best["effect"], lang))


def text(inv, lang: str) -> str:
    cols = verdict_columns(inv, lang)
    lines = [T["title"].say(lang)]
    for key in ("symptom", "cause", "experiment", "fix"):
        lines.append(f"  {T[key].say(lang)}: {cols[key]}")
    lines.append("  " + T["confidence"].say(lang, level=CONFIDENCE[inv.confidence].say(lang)))
    why = why_said(inv, lang)
    if why:
        lines.append("  " + why)
    lines.append("")
    lines.extend(_facts(inv, lang))
    lines.append(_header(inv, lang))
    for row in _rows(inv, lang):
        lines.append(f"  {row['arm']:<20} {row['changed']}")
        lines.append(f"  {'':<20} {row['said']}" + (f" -> {row['decides']}" if row["decides"] else ""))
    if inv.judgements:
        lines.append(T["hypotheses"].say(lang) + ":")
        for j in inv.judgements:
            deciding = "" if j.outcome is None else f"  ({_outcome_said(j, lang)})"
            lines.append(f"  {j.fault:<26} {STATUS[j.status].say(lang)}{deciding}")
    also = _also(inv)
    if also:
        lines.append(T["also"].say(lang, names=", ".join(also)))
    lines.extend(inv.notes)
    return "\n".join(lines)


def _rows(inv, lang) -> list[dict]:
    """The experiments' rows, said in `lang`."""
    rows = []
    for _, r in inv.experiments.iterrows():
        effect = "" if r["effect"] != r["effect"] else T["effect"].say(lang, value=r["effect"])
        conclusion = CONCLUSION[r["outcome"]].say(lang) + (
            "" if r["outcome"] != "error" else f" ({r['conclusion'].split('(', 1)[-1]}")
        decided = [f"{j.fault}: {STATUS[j.status].say(lang)}" for j in inv.judgements
                   if j.outcome is not None and j.outcome.arm == r["arm"]]
        rows.append({"arm": r["arm"], "changed": ARMS[r["arm"]].changes.say(lang),
                     "said": T["row"].say(lang, loss=r["final_loss"], effect=effect,
                                          conclusion=conclusion),
                     "decides": "; ".join(decided)})
    return rows


def _outcome_said(j, lang) -> str:
    value = "" if j.value != j.value else f" = {j.value:+.3g}"
    return EXPECT[j.outcome.expect].say(lang, arm=j.outcome.effect) + value


def _also(inv) -> list[str]:
    """Other confirmed hypotheses: the experiments run could not tell them from the top
    one (the passive ranking ordered them)."""
    return [j.fault for j in inv.judgements if j.status == "confirmed" and j.fault != inv.top]


def _header(inv, lang) -> str:
    of = T["log" if inv.log_scale else "linear"].say(lang)
    return T["experiments"].say(lang, of=of, spread=inv.spread)


def why_said(inv, lang) -> str:
    """One sentence: why the verdict has its confidence ("" for no cause named)."""
    if inv.top is None:
        return ""
    j = next((j for j in inv.judgements if j.fault == inv.top), None)
    if inv.why == "passive":
        return T["why_passive_unsupported" if inv.confidence == "low" else "why_passive"].say(lang)
    if inv.why == "twins":
        names = ", ".join(_also(inv)) or "-"
        return T["why_twins"].say(lang, names=names)
    if inv.why == "rivals":
        own = set(j.arms) if j is not None else set()
        arms = [r["arm"] for _, r in inv.experiments.iterrows()
                if r["outcome"] == "better" and r["arm"] not in own and r["arm"] != "overfit_batch"]
        return T["why_rivals"].say(lang, arms=", ".join(arms) or "-")
    if inv.why == "untested":
        return T["why_untested"].say(lang)
    if inv.why == "suggested":
        return T["why_suggested"].say(lang)
    return T["why_specific"].say(lang) if inv.why == "specific" else ""


def _unregistered(flow, lang) -> str:
    names = ", ".join(flow.unregistered[:4]) + (", ..." if len(flow.unregistered) > 4 else "")
    return T["unregistered"].say(lang, k=len(flow.unregistered), names=names)


def _facts(inv, lang) -> list[str]:
    facts = []
    if inv.reproducible is not None:
        facts.append(T["reproducible" if inv.reproducible else "not_reproducible"].say(lang))
    flow = inv.flow
    if flow is not None and flow.no_grad_at_step == flow.no_grad_at_step:
        names = f" ({', '.join(flow.without_grad[:4])}{', ...' if len(flow.without_grad) > 4 else ''})" \
            if flow.without_grad else ""
        facts.append(T["flow"].say(lang, none=len(flow.without_grad), n=flow.trainable, names=names,
                                   unopt=len(flow.not_optimized)))
    if flow is not None and flow.unregistered:
        facts.append(_unregistered(flow, lang))
    share = inv.effects.get("nonfinite_inputs", math.nan)
    if share == share and share > 0:
        facts.append(T["nonfinite_inputs"].say(lang, share=share))
    if inv.effects.get("samples_mixed") == 1.0:
        facts.append(T["samples_mixed"].say(lang))
    if inv.effects.get("normalised_over_batch") == 1.0:
        facts.append(T["normalised_over_batch"].say(lang))
    return facts


def progress_line(run, lang) -> str:
    if run.skipped:
        state = CONCLUSION["skipped"].say(lang)
    else:
        loss = run.history["loss"].iloc[-1] if len(run.history) else math.nan
        state = f"{len(run.history)} steps, last loss {loss:.4g}, {run.seconds:.1f} s"
        if run.error:
            state += f" ({run.error})"
    return f"  investigate: {run.name:<20} {state}"


# --- HTML ---------------------------------------------------------------------------------

CSS = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
       "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
       "vertical-align:top;text-align:left}th{background:#f3f3f3}.arm{display:inline-block;"
       "width:520px;margin:6px;vertical-align:top}.arm p{margin:2px 0;font-size:90%}"
       "img{width:100%}")


def to_html(inv, path, lang: str) -> None:
    """An HTML page: the verdict, each arm's loss beside the baseline's, the table."""
    e = html.escape
    cols = verdict_columns(inv, lang)
    head = "".join(f"<tr><th>{e(T[k].say(lang))}</th><td>{e(cols[k])}</td></tr>"
                   for k in ("symptom", "cause", "experiment", "fix"))
    facts = "".join(f"<li>{e(f)}</li>" for f in _facts(inv, lang) + inv.notes)
    arms = []
    for row in _rows(inv, lang):
        if row["arm"] == "baseline" or row["arm"] not in inv.histories:
            continue
        img = _plot(inv.histories["baseline"], inv.histories[row["arm"]], row["arm"])
        decides = f" → {e(row['decides'])}" if row["decides"] else ""
        arms.append(f"<div class='arm'><img alt='{e(row['arm'])}' src='data:image/png;base64,"
                    f"{img}'><p><b>{e(row['arm'])}</b>: {e(row['changed'])}</p>"
                    f"<p>{e(row['said'])}{decides}</p></div>")
    heads = "".join(f"<th>{e(h)}</th>" for h in T["hyp_heads"].say(lang).split("|"))
    hyp = "".join(
        f"<tr><td>{'<b>' + e(j.fault) + '</b>' if j.fault == inv.top else e(j.fault)}</td>"
        f"<td>{e(T['from_' + j.source].say(lang))}</td><td>{e(STATUS[j.status].say(lang))}</td>"
        f"<td>{e(_outcome_said(j, lang)) if j.outcome is not None else ''}</td></tr>"
        for j in inv.judgements)
    level = CONFIDENCE[inv.confidence].say(lang)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
            f"{e(T['title'].say(lang))}</title><style>{CSS}</style></head><body>"
            f"<h1>{e(T['title'].say(lang))}</h1><table>{head}</table>"
            f"<p>{e(T['confidence'].say(lang, level=level))}</p>"
            f"<p>{e(why_said(inv, lang))}</p><ul>{facts}</ul>"
            f"<h2>{e(T['experiments_short'].say(lang))}</h2><p>{e(_header(inv, lang))}</p>"
            f"{''.join(arms)}<h2>{e(T['hypotheses'].say(lang))}</h2>"
            f"<table><tr>{heads}</tr>{hyp}</table></body></html>")
    atomic_write(Path(path), page)


def _plot(base: pd.DataFrame, arm: pd.DataFrame, name: str) -> str:
    """The arm's training loss beside the baseline's, as a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 2.6), layout="constrained")
    for label, h, color in (("baseline", base, "0.5"), (name, arm, "C0")):
        if len(h):
            ax.plot(h["step"] if "step" in h else h.index, h["loss"], color=color, label=label,
                    lw=1.2)
    losses = pd.concat([base["loss"], arm["loss"]]).astype(float)
    finite = losses[losses.abs() < math.inf]
    if len(finite) and finite.min() > 0 and finite.max() / finite.min() > 100:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def confirm_table(faults: dict | None = None) -> str:
    """The catalogue's confirm/refute declarations as a Markdown table (docs/investigate.md
    quotes it; a test keeps the two equal)."""
    faults = catalogue.FAULTS if faults is None else faults

    def said(o) -> str:
        return f"`{o.effect}` {o.expect}"
    lines = ["| fault | confirmed when | refuted when |", "|---|---|---|"]
    for name, fault in faults.items():
        routes = " **or** ".join(" and ".join(said(o) for o in route)
                                 for route in fault.confirm_routes) or "not tested"
        refute = "; ".join(said(o) for o in fault.refute) or "-"
        lines.append(f"| {name} | {routes} | {refute} |")
    return "\n".join(lines)
