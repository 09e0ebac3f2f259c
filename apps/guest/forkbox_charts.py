"""What a matplotlib figure shows, as data: E2B's `chart` (line, scatter, bar, pie, box and
whisker; a figure of several axes is a `superchart` of them), so a UI can draw it interactively.

Read from the figure after it is rendered (tick labels exist only then). Box plots leave no trace
a reader can tell apart from plain lines, so `Axes.bxp` is wrapped to keep the statistics it drew.
Anything else is an `unknown` chart with no elements; nothing here may fail a figure's display.
"""

import datetime
import math
import re

# points of one line or scatter, and elements of one chart, kept
MAX_POINTS = 10_000
UNIT = re.compile(r"[(\[]([^()\[\]]+)[)\]]\s*$")


def patch_axes(axes_cls):
    """Keeps each Axes' box plot statistics (once per class)."""
    if getattr(axes_cls, "_forkbox_bxp", False):
        return
    drawn = axes_cls.bxp

    def bxp(self, bxpstats, *args, **kwargs):
        out = drawn(self, bxpstats, *args, **kwargs)
        try:
            self._forkbox_boxes = getattr(self, "_forkbox_boxes", []) + [dict(s) for s in bxpstats]
        except Exception:  # noqa: BLE001 - the plot stands; only its chart is lost
            pass
        return out

    axes_cls.bxp = bxp
    axes_cls._forkbox_bxp = True


def number(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(f) or math.isinf(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def converter_kind(axis):
    name = type(getattr(axis, "converter", None)).__name__
    if "Date" in name:
        return "datetime"
    if "Category" in name:
        return "categorical"
    return None


def axis_value(axis, v):
    """A value on `axis` as the chart gives it: dates as ISO text, categories by name."""
    kind = converter_kind(axis)
    if kind == "datetime":
        try:
            from matplotlib import dates

            return dates.num2date(float(v)).isoformat()
        except (TypeError, ValueError, OverflowError):
            return str(v)
    if kind == "categorical":
        mapping = getattr(getattr(axis, "units", None), "_mapping", None) or {}
        for name, idx in mapping.items():
            if idx == v:
                return str(name)
    return raw_value(v)


def raw_value(v):
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if type(v).__name__ == "datetime64":
        return str(v)
    if isinstance(v, str):
        return v
    return number(v)


def label_of(artist):
    label = artist.get_label()
    return "" if not label or label.startswith("_") else str(label)


def unit_of(label):
    m = UNIT.search(label or "")
    return m.group(1).strip() if m else None


def two_d(ax, kind, elements):
    out = {"type": kind, "title": ax.get_title(), "elements": elements}
    for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
        label = axis.get_label().get_text()
        out[f"{name}_label"] = label
        unit = unit_of(label)
        if unit:
            out[f"{name}_unit"] = unit
    return out


def with_ticks(ax, chart):
    for axis, name, scale in ((ax.xaxis, "x", ax.get_xscale()), (ax.yaxis, "y", ax.get_yscale())):
        chart[f"{name}_ticks"] = [axis_value(axis, t) for t in axis.get_ticklocs()]
        chart[f"{name}_tick_labels"] = [t.get_text() for t in axis.get_ticklabels()]
        chart[f"{name}_scale"] = converter_kind(axis) or scale
    return chart


def line_chart(ax, lines):
    elements = []
    for line in lines[:MAX_POINTS]:
        xs, ys = line.get_xdata(), line.get_ydata()
        points = [[raw_value(x), raw_value(y)] for x, y in zip(list(xs)[:MAX_POINTS], list(ys)[:MAX_POINTS])]
        elements.append({"label": label_of(line), "points": points})
    return with_ticks(ax, two_d(ax, "line", elements))


def scatter_chart(ax, collections):
    elements = []
    for col in collections[:MAX_POINTS]:
        points = [[axis_value(ax.xaxis, x), axis_value(ax.yaxis, y)] for x, y in col.get_offsets()[:MAX_POINTS]]
        elements.append({"label": label_of(col), "points": points})
    return with_ticks(ax, two_d(ax, "scatter", elements))


def tick_label_at(axis, pos):
    for loc, label in zip(axis.get_ticklocs(), axis.get_ticklabels()):
        if abs(float(loc) - pos) < 1e-9:
            return label.get_text()
    return axis_value(axis, pos)


def bar_chart(ax, containers):
    elements = []
    for c in containers:
        horizontal = getattr(c, "orientation", "vertical") == "horizontal"
        group = label_of(c)
        for rect in list(c.patches)[:MAX_POINTS]:
            if horizontal:
                label = tick_label_at(ax.yaxis, rect.get_y() + rect.get_height() / 2)
                value = rect.get_width()
            else:
                label = tick_label_at(ax.xaxis, rect.get_x() + rect.get_width() / 2)
                value = rect.get_height()
            elements.append({"label": str(label), "group": group, "value": number(value)})
    return two_d(ax, "bar", elements)


def pie_chart(ax, wedges):
    elements = [
        {"label": label_of(w), "angle": number(w.theta2 - w.theta1), "radius": number(w.r)} for w in wedges[:MAX_POINTS]
    ]
    return {"type": "pie", "title": ax.get_title(), "elements": elements}


def box_chart(ax, boxes):
    labels = [t.get_text() for t in ax.xaxis.get_ticklabels()]
    elements = []
    for i, s in enumerate(boxes[:MAX_POINTS]):
        label = s.get("label")
        if label is None:
            label = labels[i] if i < len(labels) else str(i + 1)
        elements.append(
            {
                "label": str(label),
                "min": number(s.get("whislo")),
                "first_quartile": number(s.get("q1")),
                "median": number(s.get("med")),
                "third_quartile": number(s.get("q3")),
                "max": number(s.get("whishi")),
                "outliers": [number(v) for v in list(s.get("fliers", []))[:MAX_POINTS]],
            }
        )
    return two_d(ax, "box_and_whisker", elements)


def axes_chart(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    boxes = getattr(ax, "_forkbox_boxes", None)
    if boxes:
        return box_chart(ax, boxes)
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        return pie_chart(ax, wedges)
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 0]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    if bars and not lines and not scatters:
        return bar_chart(ax, bars)
    if lines and not bars and not scatters:
        return line_chart(ax, lines)
    if scatters and not bars and not lines:
        return scatter_chart(ax, scatters)
    return {"type": "unknown", "title": ax.get_title(), "elements": []}


def chart_of(fig):
    """The figure's chart, or None when it has no axes to read."""
    axes = [ax for ax in fig.get_axes() if ax.get_visible() and not hasattr(ax, "_colorbar")]
    if not axes:
        return None
    if len(axes) == 1:
        return axes_chart(axes[0])
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return {"type": "superchart", "title": title, "elements": [axes_chart(ax) for ax in axes]}
